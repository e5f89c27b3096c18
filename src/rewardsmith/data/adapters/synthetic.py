"""The built-in synthetic suite as datasets: `synthetic/<domain>` for every domain in
rewardsmith.data.synthetic.DOMAINS. Split "train" (default) uses seed 0 and "test" seed 1; `limit` sets the
number of pairs (default DEFAULT_N). Nothing is read from disk, so these work on a fresh machine."""

from __future__ import annotations

from rewardsmith.data.adapters._common import check_split
from rewardsmith.data.dataset import LoadOptions, PairDataset
from rewardsmith.data.synthetic import DEFAULT_N, SPLIT_SEEDS, make_synthetic_pairs
from rewardsmith.errors import DataError


def load_synthetic(opts: LoadOptions, domain: str) -> PairDataset:
    """PairDataset of `limit` (default DEFAULT_N) synthetic pairs; source "builtin:synthetic/<domain>"."""
    name = f"synthetic/{domain}"
    split = check_split(name, opts.split, tuple(SPLIT_SEEDS), "train")
    if opts.limit is not None and opts.limit < 0:
        raise DataError(f"limit must be >= 0, got {opts.limit}")
    n = DEFAULT_N if opts.limit is None else opts.limit
    pairs = make_synthetic_pairs(domain, n=n, seed=SPLIT_SEEDS[split])
    return PairDataset(name=name, pairs=pairs, source=f"builtin:{name}", n_rows=len(pairs))
