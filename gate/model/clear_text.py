"""`records: {clear_text: false}`: records keep a hash of the judge's reason instead of its text.

Where the case file is the controlled reference (reviewed, access-controlled), the records that
travel as CI artifacts should not copy text from it: the judge's reason often quotes the response
or the reference. Records never hold the response or reference themselves (`field_sha256` hashes
them); with clear_text off the reason is kept as `sha256:<hex>` of its text, which still satisfies
the record contract (a non-empty reason), so decide, calibrate and compare read such records as
they read any other. The judgment cache (`cache_dir`) is a separate local store and is unaffected.
"""

from __future__ import annotations

from gate.model.loading import sha256_hex
from gate.model.policy import LoadedPolicy

HASH_PREFIX = "sha256:"


def kept_reason(loaded: LoadedPolicy, reason: str | None) -> str | None:
    """The reason as the records keep it under the policy's `records.clear_text`."""
    if reason is None or loaded.policy.records.clear_text:
        return reason
    return HASH_PREFIX + sha256_hex(reason)
