"""The one number formatter."""

from __future__ import annotations

from decimal import Decimal

from builder.format import as_given, byte_size, fmt, num, words_per_second


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


def test_a_sourced_figure_keeps_the_decimals_its_source_gave_and_no_more():
    assert (as_given(197, "TOPS").text, as_given(197.0).text, as_given(98.5).text) == ("197", "197", "98.5")
    assert as_given(1979, "TOPS").display == "1979" and as_given(3.35).text == "3.35"
    assert as_given(183.5, "TFLOPS").__html__().endswith('<span class="unit">TFLOPS</span>')


def test_a_byte_size_is_shown_in_the_unit_that_shows_it():
    assert (byte_size(2_383_872).text, byte_size(2_383_872).unit) == ("2.38", "MB")  # not 0.00 GB
    assert (byte_size(15_302_000_000).text, byte_size(15_302_000_000).unit) == ("15.30", "GB")
    assert (byte_size(4_096).text, byte_size(4_096).unit) == ("4.10", "KB")
    assert (byte_size(512).text, byte_size(512).unit) == ("512", "bytes")
