"""Typed configuration of a weak-to-strong shift run (`rewardsmith shift --config FILE`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rewardsmith.config import DEBIAS_KINDS, MAX_SEED, MAX_THREADS, DatasetConfig, ModelConfig, TrainConfig, option


@dataclass
class ShiftSplitConfig:
    gold_fraction: float = option(
        0.3, "share of the source (by first-human-turn hash) in the gold pool (teacher training)", min=0.0, max=1.0
    )
    w2s_fraction: float = option(
        0.4, "share of the source in the W2S pool (teacher-labelled student training)", min=0.0, max=1.0
    )
    id_fraction: float = option(0.3, "share of the source in the ID test", min=0.0, max=1.0)
    val_fraction: float = option(
        0.0,
        "share of the source in an ID validation split, used only to choose settings "
        "(the anchor weight) and never reported as a result",
        min=0.0,
        max=1.0,
    )
    val_pairs: int | None = option(None, "cap on validation pairs", min=1)
    gold_pairs: int | None = option(None, "cap on gold-pool pairs the teacher trains on", min=1)
    w2s_pairs: int | None = option(None, "cap on W2S-pool pairs the students train on", min=1)
    id_pairs: int | None = option(None, "cap on ID test pairs", min=1)
    target_pairs: int | None = option(300, "pairs per target (a stable hash sample of the target's split)", min=1)
    salt: str = option("shift", "salt of the split hash: another salt gives another split")


@dataclass
class TfidfSettings:
    length_feature: bool = option(
        True,
        "give the TF-IDF teacher the log-length difference as a feature (false: a "
        "teacher that cannot read length directly)",
    )
    max_features: int = option(20000, "vocabulary size of the TF-IDF teacher", min=1)
    max_ngram: int = option(2, "longest n-gram of the TF-IDF teacher", min=1, max=3)
    c: float = option(
        1.0, "inverse L2 penalty of the TF-IDF teacher's logistic regression", min=0.0, min_exclusive=True
    )


@dataclass
class TeacherConfig:
    kind: str = option(
        "model",
        "model: a rewardsmith reward model (`model`, `train`); tfidf: logistic regression "
        "on TF-IDF features and the length difference (`tfidf`)",
        choices=("model", "tfidf"),
    )
    model: ModelConfig = field(default_factory=lambda: ModelConfig(num_layers=2, freeze_backbone=True))
    train: TrainConfig = field(default_factory=lambda: TrainConfig(epochs=3.0, lr=1e-3, head_lr=1e-2))
    tfidf: TfidfSettings = field(default_factory=TfidfSettings)
    calibrate: bool = option(
        True,
        "fit a temperature for the soft labels by cross-fitting on the gold pool, so "
        "their confidence matches the teacher's accuracy",
    )
    calibration_folds: int = option(5, "cross-fitting folds for the temperature", min=2)
    seed: int = option(
        0, "teacher seed (one teacher; its labels are reused across methods and student seeds)", min=0, max=MAX_SEED
    )


@dataclass
class AnchorSettings:
    weight: float = option(1e-4, "lambda: weight of the anchor term", min=0.0)
    layers: list[float] = option(
        [1.0],
        "anchored depths as fractions of the student's layers (1.0 = last; 0.5, 0.75 = middle)",
        min=0.0,
        max=1.0,
        min_exclusive=True,
    )
    normalise: bool = option(
        False,
        "divide each layer's MSE by the mean square of its reference states, so the "
        "weight is scale-free (the same lambda means the same relative drift at any width "
        "and depth)",
    )
    reference: str = option(
        "cache",
        "anchor reference: cache (fp16, memory) | disk (fp16 memmap) | copy (frozen "
        "copy, a forward per step) | lora-base (LoRA students: the adapter disabled)",
        choices=("cache", "disk", "copy", "lora-base"),
    )


@dataclass
class ConfidenceSettings:
    form: str = option(
        "openai",
        "openai (batch quantile, warm-up then jump) | eleuther (rolling buffer, linear warm-up)",
        choices=("openai", "eleuther"),
    )
    aux_coef: float = option(0.5, "final weight of the student's hardened predictions", min=0.0, max=1.0)
    warmup_frac: float = option(0.2, "warm-up as a fraction of the steps", min=0.0, max=1.0)
    buffer_size: int = option(128, "eleuther form: predictions kept in the rolling buffer", min=0)


@dataclass
class SeamSettings:
    criteria: int = option(32, "candidate criteria (principal directions of the strong model)", min=1)
    selected: int = option(8, "criteria the weak teacher selects", min=1)
    mix: float = option(0.5, "weight of the criteria read-out against the teacher in log-odds", min=0.0, max=1.0)
    folds: int = option(5, "cross-fitting folds", min=2)
    l2: float = option(1.0, "ridge penalty of the read-out (inverse of scikit-learn's C)", min=0.0, min_exclusive=True)


@dataclass
class MethodConfig:
    name: str = option("naive", "label of this method in tables and metrics.json")
    objective: str = option("naive", "naive | confidence | anchor: a module of rewardsmith.w2s.objectives")
    refiner: str = option(
        "none", "label refiner applied to the teacher's labels first: none | seam", choices=("none", "seam")
    )
    anchor: AnchorSettings = field(default_factory=AnchorSettings)
    confidence: ConfidenceSettings = field(default_factory=ConfidenceSettings)
    seam: SeamSettings = field(default_factory=SeamSettings)
    debias: str = option(
        "inherit",
        "length debiasing of this method's students: inherit (train.debias) | none | "
        "length-covariate | odin | length-balanced",
        choices=("inherit", *DEBIAS_KINDS),
    )


@dataclass
class ShiftEvalConfig:
    n_boot: int = option(1000, "bootstrap replicates for every CI", min=0)
    confidence: float = option(0.95, "CI level", min=0.5, max=0.999)
    bf16: bool = option(
        True, "bf16 autocast when scoring (pooling and head stay fp32; fp32 on a CPU without native bf16)"
    )
    batch_size: int = option(64, "pairs per scoring batch", min=1, volatile=True)


@dataclass
class QuickConfig:
    """What --quick changes: a few-minute run of the same pipeline."""

    gold_pairs: int = option(64, "gold pairs with --quick", min=1)
    w2s_pairs: int = option(96, "W2S pairs with --quick", min=1)
    id_pairs: int = option(64, "ID test pairs with --quick", min=1)
    target_pairs: int = option(64, "pairs per target with --quick", min=1)
    max_length: int = option(96, "tokens per sequence with --quick", min=16)
    seeds: list[int] = option([0], "student seeds with --quick", min=0, max=MAX_SEED)
    n_boot: int = option(200, "bootstrap replicates with --quick", min=0)


@dataclass
class ShiftConfig:
    name: str = option("shift", "run title")
    source: DatasetConfig = field(default_factory=DatasetConfig)
    targets: list[DatasetConfig] = field(
        default_factory=list,
        metadata={"help": "datasets the students are tested on out of domain (each a dataset entry, as source)"},
    )
    data_dir: str | None = option(
        None, "folder with the real datasets (else $REWARDSMITH_DATA_DIR, ../shared/data)", volatile=True
    )
    split: ShiftSplitConfig = field(default_factory=ShiftSplitConfig)
    teacher: TeacherConfig = field(default_factory=TeacherConfig)
    student: ModelConfig = field(default_factory=lambda: ModelConfig(max_length=128))
    train: TrainConfig = field(default_factory=lambda: TrainConfig(lr=3e-5, head_lr=1e-3, checkpoint_every=0))
    methods: list[MethodConfig] = field(
        default_factory=lambda: [
            MethodConfig("naive", "naive"),
            MethodConfig("confidence", "confidence"),
            MethodConfig("seam", "naive", refiner="seam"),
            MethodConfig("anchor", "anchor"),
        ],
        metadata={"help": "W2S methods whose students are compared (each: name, objective, refiner and settings)"},
    )
    ceiling: bool = option(True, "train the strong ceiling (gold labels on the W2S pool) for PGR")
    save_students: bool = option(
        False,
        "write each student's (and the ceiling's) model folder, seed<k>/<method>/model, so it can be scored later "
        "(rewardsmith score, bon); about 90 MB each for MiniLM",
        volatile=True,
    )
    near_domain: list[str] = option(
        [],
        "targets that are siblings of the source (same collection, another "
        "split or sampling): labelled near-domain in reports",
    )
    seeds: list[int] = option([0], "student seeds", min=0, max=MAX_SEED)
    threads: int | None = option(
        None, "torch intra-op threads (none: torch's default)", min=1, max=MAX_THREADS, volatile=True
    )
    eval: ShiftEvalConfig = field(default_factory=ShiftEvalConfig)
    quick: QuickConfig = field(default_factory=QuickConfig)
