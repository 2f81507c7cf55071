"""The one number formatter."""

from __future__ import annotations

from decimal import Decimal

from builder.format import fmt, num, words_per_second


def test_round_half_up_on_the_shortest_repr():
    assert fmt(98.125) == "98.13"
    assert fmt(2.675) == "2.68"  # binary 2.67499999... but written 2.675
    assert fmt(0.005) == "0.01"
    assert fmt(113.2655) == "113.27"
    assert fmt(50) == "50.00"
    assert fmt(Decimal("1.5"), 0) == "2"


def test_num_renders_as_data_and_serialises_as_a_number():
    value = num(113.2655, unit="tok/s")
    assert value.value == 113.27
    assert str(value) == "113.27"
    assert value.__html__() == '<data class="num" value="113.27">113.27</data>\u00a0<span class="unit">tok/s</span>'
    assert num(12, 0).value == 12 and isinstance(num(12, 0).value, int)


def test_words_per_second_uses_the_rounded_rate():
    assert words_per_second(113.2655).text == "85"
    assert words_per_second(177.29).text == "133"


def test_large_numbers_are_grouped_for_reading_and_plain_in_value():
    tokens = num(262144, 0, "tokens")
    assert str(tokens) == "262,144" and tokens.text == "262144" and tokens.value == 262144
    assert tokens.__html__().startswith('<data class="num" value="262144">262,144</data>')
    assert str(num(10594.254)) == "10,594.25"
    assert str(num(2048, 0)) == "2048"
    assert str(num(-1234567, 0)) == "-1,234,567"
