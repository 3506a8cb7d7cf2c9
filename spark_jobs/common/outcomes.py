"""What an import ends with: its result, or the failure that says whether a retry may help."""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa
from pyspark.errors import AnalysisException, PySparkException

from config.errors import SluiceError, write_is_transient


@dataclass(frozen=True)
class ImportResult:
    """What one import did.

    ``rows_read``: rows the extract produced (payload bodies for SQS,
    duplicates of a key included); ``rows_written``: rows the target
    received, one per key; ``rows_rejected``: rows the target refused (in
    ``_sluice_rejects``; a run with any must end with exit code 1).
    ``skipped``: the batch was already committed, so nothing was read;
    ``rows_written`` and ``rows_rejected`` are then what that commit recorded.
    ``seconds``: how long the batch's own import took (its Spark task's load
    when it had one, see :class:`~spark_jobs.load.target.Written`); None when skipped.
    ``zero_dates``: per column, MySQL zero dates that became NULL.
    """

    batch_id: str
    rows_read: int
    rows_written: int
    target: str
    skipped: bool = False
    rows_rejected: int = 0
    seconds: float | None = field(default=None, compare=False)
    zero_dates: dict[str, int] = field(default_factory=dict, compare=False)


class BatchImportFailed(SluiceError, RuntimeError):
    """Spark or a database failed during an import.

    ``transient``: a retry may help (a lost connection, a dead executor), as
    opposed to a bad ``columns:`` expression or a row the target rejects.
    """

    def __init__(self, message: str, transient: bool = True, permanent: bool = False) -> None:
        super().__init__(message)
        self.transient = transient
        self.permanent = permanent
        # The batch came before its turn (a stream's batch whose predecessor is not in the
        # target yet): the attempt does not count.
        self.waits = False


def reason(error: Exception) -> str:
    # A Py4JJavaError's own text is "An error occurred while calling o42.jdbc";
    # the Java exception says what went wrong. Database messages carry no
    # password (credentials travel as properties, never in a URL).
    java = getattr(error, "java_exception", None)
    if java is not None:
        text = str(java.toString())
    elif isinstance(error, sa.exc.DBAPIError):
        text = str(error.orig)  # without the SQL text and its parameters
    else:
        text = str(error)
    return (text.strip().splitlines() or ["unknown error"])[0][:500]


def transient(error: Exception) -> bool:
    if isinstance(error, PySparkException):
        if (error.getCondition() or "").startswith("FAILED_JDBC"):
            return True  # a database unreachable or failing (Spark 4 raises it at analysis)
        # Otherwise an analysis error means the plan is wrong (a column or
        # expression of columns: does not resolve): retrying cannot help.
        return not isinstance(error, AnalysisException)
    if isinstance(error, sa.exc.DBAPIError):
        return write_is_transient(error)
    return True
