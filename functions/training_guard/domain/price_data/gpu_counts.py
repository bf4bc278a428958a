"""GPUs per SageMaker training instance type, for the idle-GPU guard: a host's `GPUUtilization` runs from 0 to
100 x the instance's GPU count, so one idle GPU of eight moves it by 12.5 %. Uncited types are unknown, not guessed."""

from __future__ import annotations

from typing import Final

# Amazon EC2 User Guide, "Linux accelerated computing instances", Hardware specifications (GPUs per type).
EC2_GUIDE: Final = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/accelerated-computing-instances.html"
# AWS Batch User Guide, "Run GPU jobs": the table of GPU instance types with their GPU counts (lists G6).
BATCH_GUIDE: Final = "https://docs.aws.amazon.com/batch/latest/userguide/gpu-jobs.html"

# instance type -> (GPUs, source)
GPU_COUNTS: Final[dict[str, tuple[int, str]]] = {
    "ml.p2.xlarge": (1, EC2_GUIDE),
    "ml.p2.8xlarge": (8, EC2_GUIDE),
    "ml.p2.16xlarge": (16, EC2_GUIDE),
    "ml.p3.2xlarge": (1, EC2_GUIDE),
    "ml.p3.8xlarge": (4, EC2_GUIDE),
    "ml.p3.16xlarge": (8, EC2_GUIDE),
    "ml.p3dn.24xlarge": (8, EC2_GUIDE),
    "ml.p4d.24xlarge": (8, EC2_GUIDE),
    "ml.g4dn.xlarge": (1, EC2_GUIDE),
    "ml.g4dn.2xlarge": (1, EC2_GUIDE),
    "ml.g4dn.4xlarge": (1, EC2_GUIDE),
    "ml.g4dn.8xlarge": (1, EC2_GUIDE),
    "ml.g4dn.12xlarge": (4, EC2_GUIDE),
    "ml.g4dn.16xlarge": (1, EC2_GUIDE),
    "ml.g5.xlarge": (1, EC2_GUIDE),
    "ml.g5.2xlarge": (1, EC2_GUIDE),
    "ml.g5.4xlarge": (1, EC2_GUIDE),
    "ml.g5.8xlarge": (1, EC2_GUIDE),
    "ml.g5.12xlarge": (4, EC2_GUIDE),
    "ml.g5.16xlarge": (1, EC2_GUIDE),
    "ml.g5.24xlarge": (4, EC2_GUIDE),
    "ml.g5.48xlarge": (8, EC2_GUIDE),
    "ml.g6.xlarge": (1, BATCH_GUIDE),
    "ml.g6.2xlarge": (1, BATCH_GUIDE),
    "ml.g6.4xlarge": (1, BATCH_GUIDE),
    "ml.g6.8xlarge": (1, BATCH_GUIDE),
    "ml.g6.12xlarge": (4, BATCH_GUIDE),
    "ml.g6.16xlarge": (1, BATCH_GUIDE),
}

# GPU training types whose count no AWS page consulted gives: the idle-GPU guard says it cannot normalise them.
UNCITED_GPU_TRAINING_TYPES: Final[frozenset[str]] = frozenset(
    {
        "ml.g6.24xlarge",
        "ml.g6.48xlarge",
        "ml.g6e.xlarge",
        "ml.g6e.2xlarge",
        "ml.g6e.4xlarge",
        "ml.g6e.8xlarge",
        "ml.g6e.12xlarge",
        "ml.g6e.16xlarge",
        "ml.g6e.24xlarge",
        "ml.g6e.48xlarge",
        "ml.g7.2xlarge",
        "ml.g7.4xlarge",
        "ml.g7.8xlarge",
        "ml.g7.12xlarge",
        "ml.g7.24xlarge",
        "ml.g7.48xlarge",
        "ml.g7e.2xlarge",
        "ml.g7e.4xlarge",
        "ml.g7e.8xlarge",
        "ml.g7e.12xlarge",
        "ml.g7e.24xlarge",
        "ml.g7e.48xlarge",
        "ml.p4de.24xlarge",
        "ml.p5.4xlarge",
        "ml.p5.48xlarge",
        "ml.p5e.48xlarge",
        "ml.p5en.48xlarge",
        "ml.p6-b200.48xlarge",
        "ml.p6-b300.48xlarge",
        "ml.p6e-gb200.36xlarge",
    }
)
