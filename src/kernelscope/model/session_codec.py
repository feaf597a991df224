"""Former home of the session file's launch columns: they are in model/session_file.py. Kept for importers not
yet changed over; new code imports model.session_file."""
from kernelscope.model.session_file import decode_launches, encode_launches  # noqa: F401
