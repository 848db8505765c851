"""MariaDB's ready_keys (``mariadb.py``): the concurrency keys of a queue's ready rows, by
grouped reads of bounded runs of ``sqlqueue_job_ready_by_key`` instead of the recursive skip
scan of other databases (docs/fairness.md#the-plans)."""

from typing import NamedTuple

#: Ready index entries one read of ready_keys passes over at most, on MariaDB: a key with more
#: ready jobs costs this many entries, and the next read starts after it by a range of the index.
KEY_READ_ENTRIES = 2_000
#: The first read's entries; each read that finds several keys makes the next one 4 times as
#: long, up to KEY_READ_ENTRIES. A key alone with a backlog (a fair queue's usual busy state)
#: costs a read of this many entries, not of KEY_READ_ENTRIES: 0.46 ms instead of 1.15 ms a
#: scan behind 50,000 ready jobs of one key.
KEY_READ_FIRST = 64


class KeysInReads(NamedTuple):
    """ready_keys on MariaDB: the distinct keys of a queue's ready rows (``is_ready = 1`` alone,
    ``ready_prefix``: the status is not in the index, and testing it read each row from the
    table), in key order, up to a limit, from ``sqlqueue_job_ready_by_key`` alone. One read
    (``GROUP BY``) of the entries up to the limit-th key passed over every entry of the keys
    before it: each claim of a fair queue whose first key had 100,000 ready jobs read all of
    them (73 ms a claim, benchmarks/fair_claim_cost.py). Each read here takes the keys of the
    next KEY_READ_FIRST entries, then of up to 4 times as many after a read that found several
    keys, up to KEY_READ_ENTRIES; while a read was full, the next starts after its last key, by
    a range of the index that skips that key's other entries. So a key costs at most
    KEY_READ_ENTRIES entries, and a claim one read more per key with that many jobs.
    ``first``/``after`` read the first entries (the key's test SQL text, no parameter), or those
    after a key (one parameter); parameters: the queue, ``after``'s key if any, the limit."""

    first: str
    after: str

    def run(self, cursor, params) -> list:
        queue, *after, limit = params
        statement, bound, keys = (self.after if after else self.first), after, []
        size = KEY_READ_FIRST
        while True:
            cursor.execute(statement, [queue, *bound, size])
            rows = cursor.fetchall()
            keys += [key for key, _ in rows]
            if len(keys) >= limit or sum(entries for _, entries in rows) < size:
                return [(key,) for key in keys[:limit]]
            statement, bound = self.after, [keys[-1]]
            if len(rows) > 1:  # many keys with few jobs: longer reads, fewer round trips
                size = min(size * 4, KEY_READ_ENTRIES)


def ready_keys(table, col: dict, ready_prefix: str, first: str) -> KeysInReads:
    """KeysInReads of the keys that pass ``first`` (SQL text of the test with no parameter)."""
    key = col["concurrency_key"]

    def read(test):
        return (f"SELECT {key}, COUNT(*) FROM (SELECT {key} FROM {table} "  # noqa: S608 - names
                f"WHERE {ready_prefix}{col['queue']} = %s AND {key} {test} "
                f"ORDER BY {key} LIMIT %s) AS entries GROUP BY {key} ORDER BY {key}")

    return KeysInReads(first=read(first), after=read("> %s"))
