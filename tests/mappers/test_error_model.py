"""The error model keeps an error's kind and its one line across Beam's re-raising."""

import pickle

from ddb2bt.mappers.errors import INTERRUPTED, Interrupted, ServiceError, UsageError, recover


class TooMany(UsageError):
    pass


def test_a_step_suffix_is_dropped_from_an_error_beam_re_raised_as_its_own_type():
    beam_style = TooMany("stopped after 120 dead letters; resume with --max-dead-letters 100% [while running 'Persist']")
    found = recover(beam_style)
    assert type(found) is TooMany and found.exit_code == 2
    assert found.one_line() == "stopped after 120 dead letters; resume with --max-dead-letters 100%"


def test_an_error_named_in_beams_runtime_error_text_is_rebuilt_with_its_kind():
    text = ("Traceback (most recent call last):\n  ...\n"
            f"{TooMany.__module__}.TooMany: too many dead letters [while running 'Persist']\n")
    found = recover(RuntimeError(text))
    assert type(found) is TooMany and found.one_line() == "too many dead letters"


def test_a_cause_chain_is_followed_and_errors_pickle():
    try:
        try:
            raise ServiceError("Bigtable did not answer", "is the emulator running?")
        except ServiceError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        found = recover(outer)
    assert isinstance(found, ServiceError) and found.exit_code == 3
    assert pickle.loads(pickle.dumps(found)).one_line() == "Bigtable did not answer; is the emulator running?"
    assert recover(ValueError("a bug")) is None
    assert Interrupted("stopped").exit_code == INTERRUPTED == 130
