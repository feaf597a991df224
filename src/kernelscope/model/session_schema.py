"""Former home of the session file's checks: they are in model/session_file.py. Kept for importers not yet
changed over; new code imports model.session_file."""
from kernelscope.model.session_file import activity, check_session, device, host_sync, launch, region  # noqa: F401
