"""Plain data for a profiling session. No third-party imports: a session
recorded on an H100 loads and renders anywhere."""
from kernelscope.model.device import Device, attribute
from kernelscope.model.launch import Activity, Dim3, Launch, Region
from kernelscope.model.metric import SOURCES, Metric, MetricMap
from kernelscope.model.session import SCHEMA_VERSION, CollectorStatus, Session, SessionFileError

__all__ = [
    "Activity", "CollectorStatus", "Device", "Dim3", "Launch", "Metric", "MetricMap", "Region",
    "SCHEMA_VERSION", "SOURCES", "Session", "SessionFileError", "attribute",
]
