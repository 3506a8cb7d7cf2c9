"""A batch's computed columns: ``columns: {target_column: Spark SQL expression}``, applied
to the rows as read, before any load (and to a verify's source side the same way)."""

from __future__ import annotations

from pyspark.sql import DataFrame

from spark_jobs.engines.spark_names import quoted


def apply_columns(df: DataFrame, columns: dict[str, str] | None) -> DataFrame:
    """Apply ``columns: {target_column: Spark SQL expression}``; None keeps every column."""
    if not columns:
        return df
    return df.selectExpr(*[f"{expr} AS {quoted(name)}" for name, expr in columns.items()])
