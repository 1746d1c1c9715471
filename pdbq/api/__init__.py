"""The embedded API: `connect`, `Database`, `Result`, plus the Python inference entry points
(`infer`, `query_plan`, `query_graph`) and `analyze` over a database."""

from pdbq.api.analyze import analyze
from pdbq.api.database import Database, connect
from pdbq.api.result import Result
from pdbq.planning.infer import Inference, RelationAnswers, infer
from pdbq.planning.plan import query_graph, query_plan

__all__ = ["connect", "Database", "Result", "analyze", "infer", "Inference", "RelationAnswers", "query_graph", "query_plan"]
