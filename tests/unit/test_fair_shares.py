"""The fair claim's arithmetic (claim/fair.py ``allot``): shares in proportion to the weights,
no banked turns for an idle key, caps. The claims themselves, on real databases, are in
tests/integration/test_fairness.py."""

from collections import Counter

from django_sqlqueue.claim.fair import allot


def run_claims(keys, claims, batch, weights=None, caps_of=None):
    """``claims`` claims of ``batch`` slots each; the slots each key got in all."""
    leads, total = {}, Counter()
    for number in range(claims):
        caps = caps_of(number) if caps_of else {}
        given, leads = allot(keys, batch, weights=weights or {}, leads=leads, caps=caps)
        total.update(given)
    return total


def test_equal_keys_get_equal_shares_whatever_the_batch():
    for batch in (1, 3, 7, 10):
        total = run_claims(["a", "b", "c", ""], 300, batch)
        assert max(total.values()) - min(total.values()) <= 1, (batch, total)


def test_shares_follow_the_weights():
    total = run_claims(["a", "b", ""], 600, 1, weights={"a": 3, "": 2})
    assert total == {"a": 300, "b": 100, "": 200}
    total = run_claims(["a", "b"], 100, 8, weights={"a": 0.5, "b": 1.5})
    assert (total["a"], total["b"]) == (200, 600)


def test_a_batch_rotates_between_keys_before_giving_one_key_a_second_slot():
    given, _ = allot(["a", "b", "c"], 3, weights={}, leads={}, caps={})
    assert given == {"a": 1, "b": 1, "c": 1}


def test_a_cap_gives_the_rest_to_the_other_keys():
    given, _ = allot(["a", "b"], 10, weights={}, leads={}, caps={"b": 2})
    assert given == {"a": 8, "b": 2}
    given, _ = allot(["a", "b"], 10, weights={}, leads={}, caps={"b": 0})
    assert given == {"a": 10}


def test_an_idle_key_does_not_bank_the_turns_it_missed():
    # "b" is idle (no ready jobs) for 100 claims, then comes back with a backlog: it gets its
    # share from then on, not every slot until it has caught up with "a".
    leads = {}
    for _ in range(100):
        _, leads = allot(["a"], 4, weights={}, leads=leads, caps={})
    given, leads = allot(["a", "b"], 4, weights={}, leads=leads, caps={})
    assert given == {"a": 2, "b": 2}


def test_the_leads_kept_stay_as_few_as_the_keys_served_ahead():
    _, leads = allot([f"k{n}" for n in range(100)], 1000, weights={}, leads={}, caps={})
    assert len(leads) <= 100 and all(0 < lead <= 1 for lead in leads.values())
    _, leads = allot(["a", "b"], 10, weights={}, leads={"gone": 0.5}, caps={})
    assert "gone" not in leads  # a key passed by the virtual time needs no entry
