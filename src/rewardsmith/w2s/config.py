"""Typed configuration of a weak-to-strong shift run (`rewardsmith shift --config FILE`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rewardsmith.config import DatasetConfig, ModelConfig, TrainConfig, option


@dataclass
class ShiftSplitConfig:
    gold_fraction: float = option(
        0.3, "share of the source (by first-human-turn hash) in the gold pool (teacher training)"
    )
    w2s_fraction: float = option(0.4, "share of the source in the W2S pool (teacher-labelled student training)")
    id_fraction: float = option(0.3, "share of the source in the ID test")
    gold_pairs: int | None = option(None, "cap on gold-pool pairs the teacher trains on")
    w2s_pairs: int | None = option(None, "cap on W2S-pool pairs the students train on")
    id_pairs: int | None = option(None, "cap on ID test pairs")
    target_pairs: int | None = option(300, "pairs per target (a stable hash sample of the target's split)")
    salt: str = option("shift", "salt of the split hash: another salt gives another split")


@dataclass
class TeacherConfig:
    model: ModelConfig = field(default_factory=lambda: ModelConfig(num_layers=2, freeze_backbone=True))
    train: TrainConfig = field(default_factory=lambda: TrainConfig(epochs=3.0, lr=1e-3, head_lr=1e-2))
    seed: int = option(0, "teacher seed (one teacher; its labels are reused across methods and student seeds)")


@dataclass
class MethodConfig:
    name: str = option("naive", "label of this method in tables and metrics.json")
    objective: str = option("naive", "naive | confidence | anchor | ceiling (registered objectives)")
    refiner: str = option("none", "label refiner applied to the teacher's labels first: none | seam")
    anchor_weight: float = option(1e-4, "lambda: weight of the anchor MSE")
    anchor_layers: list[float] = option(
        [1.0], "anchored depths as fractions of the student's layers (1.0 = last; 0.5, 0.75 = middle)"
    )
    reference: str = option(
        "cache",
        "anchor reference: cache (fp16, memory) | disk (fp16 memmap) | copy (frozen copy, a forward per "
        "step) | lora-base (LoRA students: the base model with the adapter disabled)",
    )
    confidence_form: str = option(
        "openai", "openai (batch quantile, warm-up then jump) | eleuther (rolling buffer, linear warm-up)"
    )
    aux_coef: float = option(0.5, "confidence loss: final weight of the student's hardened predictions")
    warmup_frac: float = option(0.2, "confidence loss: warm-up as a fraction of the steps")
    buffer_size: int = option(128, "confidence loss, eleuther form: predictions kept in the rolling buffer")
    seam_criteria: int = option(32, "seam: candidate criteria (principal directions of the strong model)")
    seam_selected: int = option(8, "seam: criteria the weak teacher selects")
    seam_mix: float = option(0.5, "seam: weight of the criteria read-out against the teacher in log-odds")
    seam_folds: int = option(5, "seam: cross-fitting folds")
    seam_l2: float = option(1.0, "seam: ridge penalty of the read-out")


@dataclass
class ShiftEvalConfig:
    n_boot: int = option(1000, "bootstrap replicates for every CI")
    confidence: float = option(0.95, "CI level")
    bf16: bool = option(True, "bf16 autocast when scoring (3x faster on CPU; pooling and head stay fp32)")
    batch_size: int = option(64, "pairs per scoring batch")


@dataclass
class QuickConfig:
    """What --quick changes: a few-minute run of the same pipeline."""

    gold_pairs: int = option(64, "gold pairs with --quick")
    w2s_pairs: int = option(96, "W2S pairs with --quick")
    id_pairs: int = option(64, "ID test pairs with --quick")
    target_pairs: int = option(64, "pairs per target with --quick")
    max_length: int = option(96, "tokens per sequence with --quick")
    seeds: list[int] = option([0], "student seeds with --quick")
    n_boot: int = option(200, "bootstrap replicates with --quick")


@dataclass
class ShiftConfig:
    name: str = option("shift", "run title")
    source: DatasetConfig = field(default_factory=DatasetConfig)
    targets: list[DatasetConfig] = field(default_factory=list)
    data_dir: str | None = option(None, "folder with the real datasets (else $REWARDSMITH_DATA_DIR, ../shared/data)")
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
        ]
    )
    ceiling: bool = option(True, "train the strong ceiling (gold labels on the W2S pool) for PGR")
    seeds: list[int] = option([0], "student seeds")
    eval: ShiftEvalConfig = field(default_factory=ShiftEvalConfig)
    quick: QuickConfig = field(default_factory=QuickConfig)
