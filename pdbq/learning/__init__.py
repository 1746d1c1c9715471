"""Weight learning above inference: SGD with persistent Gibbs chains, holdout and calibration,
SampleRank over any ranking problem (coreference: entity moves ranked by B³/pairwise F1), the
CEM split/merge proposer.

See docs/learning.md. The LEARN WEIGHTS statement runs through `pdbq.learning.statement`.
"""

from pdbq.learning.cem import CEMConfig, DecodeResult, cem_decode, cem_optimize
from pdbq.learning.config import LearnConfig
from pdbq.learning.coref_rank import CorefLearnResult, CorefRanking, PairTable, learn_coref_weights
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
    "CorefRanking",
    "PairTable",
    "CorefLearnResult",
    "learn_coref_weights",
    "CEMConfig",
    "DecodeResult",
    "cem_decode",
    "cem_optimize",
]
