"""RecordValidator: what becomes a keyed record, what goes to quarantine, and with which errors."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError, field_validator

from crawlfleet.data.validate import Invalid, RecordValidator, Valid, invalid_from_exception

PAGE = "https://shop.example/cat/1"


class Product(BaseModel):
    sku: str | None
    name: str
    price: Decimal
    released: date | None = None

    @field_validator("name")
    @classmethod
    def not_placeholder(cls, value: str) -> str:
        if value == "TBD":
            raise ValueError("placeholder name")
        return value


class Listing(BaseModel):
    sku: str
    name: str
    price: float


class Variant(BaseModel):
    sku: str
    size: int
    name: str = "x"


GOOD = {"sku": "A-1", "name": "Mug", "price": "9.50", "released": "2024-05-01"}


def check(validator: RecordValidator, obj: Any, position: int = 0) -> Valid | Invalid:
    return validator.check(obj, page_url=PAGE, position=position)


def test_dict_valid_with_json_data() -> None:
    result = check(RecordValidator(Product, "sku"), GOOD)
    assert result == Valid("A-1", {**GOOD, "price": "9.50"})
    json.dumps(result.data)  # JSON-ready: Decimal and date became strings


def test_model_instance_of_model() -> None:
    result = check(RecordValidator(Product, "sku"), Product.model_validate(GOOD))
    assert isinstance(result, Valid)
    assert result.data["released"] == "2024-05-01"


def test_other_model_class_is_revalidated() -> None:
    validator = RecordValidator(Product, "sku")
    assert isinstance(check(validator, Listing(sku="B", name="Pen", price=1.5)), Valid)
    result = check(validator, Listing(sku="B", name="TBD", price=1.5))
    assert isinstance(result, Invalid)
    assert result.errors[0]["loc"] == ["name"]


def test_invalid_dict_keeps_data_and_json_safe_errors() -> None:
    bad = {"sku": "A-2", "name": "TBD", "price": object()}
    result = check(RecordValidator(Product, "sku"), bad)
    assert isinstance(result, Invalid)
    assert {tuple(e["loc"]) for e in result.errors} == {("name",), ("price",)}
    by_loc = {e["loc"][0]: e for e in result.errors}
    assert by_loc["name"]["input"] == "TBD"
    assert by_loc["name"]["ctx"] == {"error": "placeholder name"}
    assert "url" not in by_loc["name"]
    assert result.data["sku"] == "A-2"
    json.dumps([result.data, result.errors])  # storable as JSON despite object()


@pytest.mark.parametrize("obj", [42, "text", ["a"], None, (1, 2)])
def test_non_records_are_invalid(obj: Any) -> None:
    for validator in (RecordValidator(Product, None), RecordValidator(None, None)):
        result = check(validator, obj)
        assert isinstance(result, Invalid)
        assert result.errors[0]["type"] == "record_type"
        assert "must be a dict or a pydantic model" in result.errors[0]["msg"]
        json.dumps([result.data, result.errors])


def test_no_model_accepts_dicts_and_models_as_they_are() -> None:
    validator = RecordValidator(None, None)
    raw = {"a": 1, "when": date(2024, 1, 2), "tags": {"x"}}
    assert check(validator, raw, 3) == Valid(
        f"{PAGE}#3", {"a": 1, "when": "2024-01-02", "tags": ["x"]}
    )
    result = check(validator, Variant(sku="S", size=2), 4)
    assert result == Valid(f"{PAGE}#4", {"sku": "S", "size": 2, "name": "x"})


def test_no_model_unserialisable_value_is_invalid() -> None:
    result = check(RecordValidator(None, None), {"a": object()})
    assert isinstance(result, Invalid)
    assert result.errors[0]["type"] == "serialization_error"
    json.dumps(result.data)


def test_key_without_item_key_is_page_and_position() -> None:
    validator = RecordValidator(Product, None)
    keys = [check(validator, GOOD, n) for n in range(3)]
    assert [k.key for k in keys if isinstance(k, Valid)] == [f"{PAGE}#0", f"{PAGE}#1", f"{PAGE}#2"]


@pytest.mark.parametrize(
    ("sku", "message"),
    [(None, "item_key field 'sku' is missing"), ("", "item_key field 'sku' is empty")],
)
def test_missing_key_field_is_invalid(sku: str | None, message: str) -> None:
    result = check(RecordValidator(Product, "sku"), {**GOOD, "sku": sku})
    assert isinstance(result, Invalid)
    assert result.errors == [{"type": "item_key", "loc": ["sku"], "msg": message, "input": sku}]


def test_missing_key_without_model() -> None:
    result = check(RecordValidator(None, "sku"), {"name": "x"})
    assert isinstance(result, Invalid)
    assert result.errors[0]["msg"] == "item_key field 'sku' is missing"


def test_compound_key_is_unambiguous() -> None:
    validator = RecordValidator(Variant, ("sku", "size"))
    first = check(validator, {"sku": "a,b", "size": 1})
    second = check(validator, {"sku": "a", "size": "1"})
    assert isinstance(first, Valid)
    assert isinstance(second, Valid)
    assert first.key == '["a,b",1]'
    assert second.key == '["a",1]'
    assert first.key != second.key


def test_single_non_string_key_is_json() -> None:
    result = check(RecordValidator(Variant, "size"), {"sku": "s", "size": 7})
    assert isinstance(result, Valid)
    assert result.key == "7"


def test_unknown_item_key_field_rejected_up_front() -> None:
    with pytest.raises(ValueError, match="'skew' is not a field of Product"):
        RecordValidator(Product, "skew")


def test_invalid_from_exception() -> None:
    with pytest.raises(ValidationError) as caught:
        Product(sku="x", name="TBD", price=Decimal("1"))
    result = invalid_from_exception(caught.value)
    assert result.data is None
    assert result.errors[0]["loc"] == ["name"]
    assert result.errors[0]["msg"] == "Value error, placeholder name"
    json.dumps(result.errors)
    assert invalid_from_exception(caught.value, data={"b": b"\xff"}).data == {"b": "_w=="}


# -- hostile values: every record ends Valid and storable, or Invalid with a named reason -----


def _deep(levels: int) -> dict[str, Any]:
    top: dict[str, Any] = {}
    node = top
    for _ in range(levels):
        node["x"] = {}
        node = node["x"]
    return top


class Priced(BaseModel):
    name: str
    price: float


class PricedInf(BaseModel):
    model_config = {"allow_inf_nan": True}
    name: str
    price: float


@pytest.mark.parametrize(
    ("model", "obj", "kind"),
    [
        (None, {"name": "caf\udce9"}, "lone_surrogate"),
        (None, {"caf\udce9": 1}, "invalid_value"),
        (None, {"name": "a\x00b"}, "nul_character"),
        (None, {"price": float("nan")}, "non_finite_number"),
        (None, {"price": [1.0, float("-inf")]}, "non_finite_number"),
        (Priced, {"name": "x", "price": float("inf")}, "non_finite_number"),
        (Priced, {"name": "x", "price": "NaN"}, "non_finite_number"),
        (None, _deep(5_000), "invalid_value"),
        (None, _deep(150), "too_deep"),
        (None, {"blob": b"\xe9\xff"}, "invalid_value"),
        (Priced, {"name": b"\xe9\xff", "price": 1}, "string_unicode"),
        (Priced, {"name": "caf\udce9", "price": 1}, "lone_surrogate"),
    ],
)
def test_check__hostile_values_are_quarantined_with_a_named_reason_and_storable(
    model: type[BaseModel] | None, obj: dict[str, Any], kind: str
) -> None:
    got = RecordValidator(model, None).check(obj, page_url=PAGE, position=0)
    assert isinstance(got, Invalid)
    assert kind in {e["type"] for e in got.errors}
    # what goes to quarantine is strict JSON, UTF-8 clean
    text = json.dumps([got.data, got.errors], allow_nan=False, ensure_ascii=False)
    text.encode("utf-8")
    assert "\\u0000" not in text


def test_check__nan_allowed_by_the_model_is_stored_as_null() -> None:
    got = RecordValidator(PricedInf, None).check(
        {"name": "x", "price": float("nan")}, page_url=PAGE, position=0
    )
    assert got == Valid(f"{PAGE}#0", {"name": "x", "price": None})


def test_jsonsafe__the_six_characters_backslash_u0000_are_text_a_nul_is_not_storable() -> None:
    from crawlfleet.data import jsonsafe

    # a key or value spelling "\u0000" with a real backslash is ordinary text (found by the fuzz
    # test: it was refused as a NUL, and its quarantine row could not be written either)
    assert jsonsafe.dumps({"\\u0000": "\\\\u0000"}) == '{"\\\\u0000":"\\\\\\\\u0000"}'
    assert jsonsafe.lenient_problem("\\u0000") is None
    for bad in ("\x00", {"k": "a\x00"}, ["\\\x00"]):
        with pytest.raises(jsonsafe.Unstorable):
            jsonsafe.dumps(bad)
        assert jsonsafe.lenient_problem(bad) == "nul_character"
