"""Parsing vLLM's Prometheus exposition into the counters the protocol needs."""

from __future__ import annotations

import math

import pytest

from runner.metrics_scrape import MetricsError, counters_from_samples, parse_exposition

# Shaped like vLLM 0.32's /metrics on an ngram speculative server (lines copied from a real one).
SPEC_SERVER_TEXT = """\
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="demo"} 4096.0
vllm:generation_tokens_created{engine="0",model_name="demo"} 1.7962127914949942e+09
vllm:prompt_tokens_total{engine="0",model_name="demo"} 174.0
vllm:spec_decode_num_drafts_total{engine="0",model_name="demo"} 30.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="demo"} 82.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="demo"} 60.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="demo",position="0"} 26.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="demo",position="1"} 18.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="demo",position="2"} 16.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="demo"} 8.0
"""


def test_spec_counters_and_derived_rates() -> None:
    counters = counters_from_samples(parse_exposition(SPEC_SERVER_TEXT))
    assert counters.generation_tokens == 4096
    assert counters.prompt_tokens == 174
    assert (counters.spec_drafts, counters.spec_draft_tokens, counters.spec_accepted_tokens) == (30, 82, 60)
    assert counters.spec_accepted_per_position == {0: 26, 1: 18, 2: 16}
    assert counters.acceptance_rate == pytest.approx(60 / 82)
    assert counters.mean_acceptance_length == pytest.approx(3.0)


def test_minus_gives_the_increase_of_every_counter() -> None:
    before = counters_from_samples(parse_exposition(SPEC_SERVER_TEXT))
    after_text = (
        SPEC_SERVER_TEXT.replace("} 4096.0", "} 4196.0")
        .replace("} 30.0", "} 40.0")
        .replace('position="2"} 16.0', 'position="2"} 19.0')
    )
    delta = counters_from_samples(parse_exposition(after_text)).minus(before)
    assert delta.generation_tokens == 100
    assert delta.spec_drafts == 10
    assert delta.spec_accepted_per_position == {0: 0, 1: 0, 2: 3}


def test_plain_server_has_no_spec_counters() -> None:
    counters = counters_from_samples(parse_exposition('vllm:generation_tokens_total{engine="0"} 12.0\n'))
    assert counters.spec_drafts is None
    assert counters.acceptance_rate is None and counters.mean_acceptance_length is None
    assert counters.minus(counters).spec_drafts is None


def test_counters_are_summed_over_engines() -> None:
    text = 'vllm:generation_tokens_total{engine="0"} 5\nvllm:generation_tokens_total{engine="1"} 7\n'
    assert counters_from_samples(parse_exposition(text)).generation_tokens == 12


def test_label_values_with_escapes_commas_and_braces() -> None:
    (sample,) = parse_exposition('m{path="a\\"b,c}",x="\\\\n"} -Inf 1700000000000\n')
    assert sample.labels == {"path": 'a"b,c}', "x": "\\n"}
    assert sample.value == -math.inf


def test_sample_without_labels() -> None:
    (sample,) = parse_exposition("process_open_fds 17\n")
    assert (sample.name, sample.labels, sample.value) == ("process_open_fds", {}, 17.0)


def test_unparseable_line_names_its_number() -> None:
    with pytest.raises(MetricsError, match="line 2 unparseable"):
        parse_exposition('ok 1\nbroken{label="x" 3\n')


def test_non_vllm_metrics_are_rejected() -> None:
    with pytest.raises(MetricsError, match="no vllm:generation_tokens_total"):
        counters_from_samples(parse_exposition("process_open_fds 17\n"))
