"""Sinks: how a claimed batch reaches a Spark import job (see :mod:`sinks.abc`)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from config.models import SluiceConfig
    from sinks.abc import Sink


def make_sink(cfg: SluiceConfig, config_path: str | os.PathLike[str]) -> Sink:
    """The sink ``spark.deploy`` asks for.

    ``session`` (default): :class:`~sinks.spark.SparkSink`, import jobs on an
    in-process SparkSession, which starts at once. ``submit``: :class:`~sinks.submit.SubmitSink`,
    one ``spark-submit`` application per batch, loading ``config_path``.
    Imported here, not at the top: each pulls in pyspark.
    """
    if cfg.spark.deploy == "submit":
        from sinks.submit import SubmitSink

        return SubmitSink(cfg, config_path)
    from sinks.spark import SparkSink

    # The JVM starts (seconds) while the scheduler reads its first keys.
    return SparkSink(cfg, warm_up=True)
