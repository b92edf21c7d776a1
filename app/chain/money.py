"""Money is `Decimal` US dollars, quantized once where a float enters the system."""

from decimal import ROUND_HALF_EVEN, Decimal
from typing import Annotated

from pydantic import PlainSerializer

# LiteLLM computes costs as floats; 1e-12 USD keeps every price of its map exact while
# dropping the float noise (3e-06 * 10 = 2.9999999999999997e-05 becomes 0.000030000000).
USD_QUANTUM = Decimal("1e-12")


def quantize_usd(value: float | Decimal) -> Decimal:
    """Turns a float or Decimal dollar amount into the canonical Decimal."""
    amount = value if isinstance(value, Decimal) else Decimal(repr(float(value)))
    return amount.quantize(USD_QUANTUM, rounding=ROUND_HALF_EVEN)


def format_usd(value: Decimal) -> str:
    """Plain decimal notation without trailing zeros: '0.00003', '0', '12.5'."""
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


# Serialized to JSON as a string, so no client parses money as a float.
USD = Annotated[Decimal, PlainSerializer(format_usd, return_type=str, when_used="json")]
