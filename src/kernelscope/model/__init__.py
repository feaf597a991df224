"""Plain data for a profiling session. No third-party imports: a session
recorded on an H100 loads and renders anywhere."""
from kernelscope.model.blocks import BlockRecords, PhaseScopes, WarpScopes
from kernelscope.model.device import Device, attribute
from kernelscope.model.host_sync import HostSync
from kernelscope.model.launch import Activity, Dim3, Launch, Region
from kernelscope.model.metric import SOURCES, Metric, MetricMap
from kernelscope.model.ranks import Collective, RankInfo
from kernelscope.model.sample import DeviceReading, GpuProcess, Sample
from kernelscope.model.session import SCHEMA_VERSION, CollectorStatus, Session, SessionFileError
from kernelscope.model.vendor_rule import VendorRuleResult

__all__ = [
    "Activity", "BlockRecords", "PhaseScopes", "WarpScopes", "CollectorStatus", "Device", "DeviceReading", "Dim3",
    "GpuProcess", "HostSync", "Launch", "Metric", "MetricMap", "Region", "Sample", "Collective", "RankInfo",
    "SCHEMA_VERSION", "SOURCES", "Session", "SessionFileError", "VendorRuleResult", "attribute"
]
