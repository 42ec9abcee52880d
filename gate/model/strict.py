"""The base of every policy model: unknown keys are errors, numbers are finite and never booleans."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

_NUMBER_TYPES = (int, float, int | None, float | None)


class Strict(BaseModel):
    # Every number is finite: `.inf` in a cost cap or a timeout would turn the bound off.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, v: object, info: ValidationInfo) -> object:
        # pydantic reads `true` as 1 for a number: `max_false_passes: true` must not allow one.
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(v, bool) and field is not None and field.annotation in _NUMBER_TYPES:
            raise ValueError(f"{str(v).lower()} is not a number; fix: write a number")
        return v
