"""handlers/groups.py's OffsetCommit answers, encoded once per (version, partitions, errors) and sent again with each
request's correlation id (codec.EncodedBody): the same frame as the response object encoded whole, and a cache
bounded in bytes as in entries."""
from __future__ import annotations

from kafka.protocol.consumer import OffsetCommitResponse

from kafkite.server.handlers import groups
from kafkite.wire import codec


def _whole(v: int, key: tuple, correlation_id: int) -> bytes:
    T = OffsetCommitResponse.OffsetCommitResponseTopic
    response = OffsetCommitResponse(version=v, throttle_time_ms=0, topics=[
        T(name=n, partitions=[T.OffsetCommitResponsePartition(partition_index=i, error_code=c) for i, c in parts])
        for n, parts in key])
    return bytes(codec.encode_response(response, v, correlation_id))


def test_an_answer_encoded_once_is_the_whole_response_frame_at_every_version():
    key = (("orders", ((0, 0), (1, 3))), ("ünïcode", ((7, 29),)))
    for v in range(10):  # flexible (header v1) from v8
        answer = groups._commit_answer(v, key)
        assert groups._commit_answer(v, key) is answer
        for cid in (0, 77, -5):
            assert bytes(codec.encode_response(answer, v, cid)) == _whole(v, key, cid)


def test_the_answers_kept_are_bounded_in_bytes(monkeypatch):
    monkeypatch.setattr(groups, "_COMMIT_ANSWERS", {})
    monkeypatch.setattr(groups, "_commit_answers_bytes", 0)
    monkeypatch.setattr(groups, "_COMMIT_ANSWERS_MAX_BYTES", 20_000)
    for j in range(100):  # distinct answers of 300 partitions each (~2 KB encoded)
        groups._commit_answer(9, tuple((f"t{j}-{t}", tuple((i, 3) for i in range(100))) for t in range(3)))
        held = sum(len(a.data) for a in groups._COMMIT_ANSWERS.values())
        assert held == groups._commit_answers_bytes <= 20_000
    assert 0 < len(groups._COMMIT_ANSWERS) < 100
