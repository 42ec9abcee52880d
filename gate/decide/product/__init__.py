"""A product lane's decision: per slice, the application's failure rate against its limit.

What it holds: the slice's judged answers and the judge's calibration counts (`answers`), the verdict
from the calibration estimate (`verdict`), the audit estimate's verdict, zero tolerance and transport
(`audit`), and the stop asked one answer at a time (`stop`).
What it may import: as `gate.decide`; its arithmetic is `gate.estimate`'s.
"""
