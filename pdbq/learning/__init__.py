"""Weight learning above inference: SGD with persistent Gibbs chains, holdout and calibration,
SampleRank over any ranking problem.

See docs/learning.md. The LEARN WEIGHTS statement runs through `pdbq.learning.statement`.
"""

from pdbq.learning.config import LearnConfig
from pdbq.learning.samplerank import GraphRanking, RankingProblem, SampleRankConfig, SampleRankResult, samplerank
from pdbq.errors import LearningError
from pdbq.learning.sgd import EpochInfo, SGDResult, learn_sgd

__all__ = [
    "LearnConfig",
    "learn_sgd",
    "SGDResult",
    "EpochInfo",
    "LearningError",
    "samplerank",
    "SampleRankConfig",
    "SampleRankResult",
    "RankingProblem",
    "GraphRanking",
]
