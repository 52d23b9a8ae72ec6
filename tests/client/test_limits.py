"""The upload limit in one sentence everywhere: the API, the website and the client say it the same."""

from __future__ import annotations

from solboard_common.limits import kib, source_limit, source_too_large


def test_a_byte_count_reads_in_kib() -> None:
    assert kib(512 * 1024) == "512 KiB" and kib(1536) == "1.5 KiB" and kib(100) == "0.09766 KiB"


def test_a_refusal_states_the_size_and_the_limit() -> None:
    assert source_limit(524288) == "524288 bytes (512 KiB)"
    assert (
        source_too_large(600000, 524288) == "the source is 600000 bytes; the limit is 524288 bytes (512 KiB)"
    )


def test_a_source_not_read_to_its_end_is_over_the_limit_without_a_size() -> None:
    assert source_too_large(None, 524288) == "the source is over the limit of 524288 bytes (512 KiB)"
