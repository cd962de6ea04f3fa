"""Running a test's work in several threads at once and collecting what they return."""

import threading


def in_threads(step, threads=3, repeats=10):
    """Call ``step()`` ``repeats`` times in each of ``threads`` threads at once; returns every
    result. An exception in a thread is raised here (an assertion in a thread would be lost)."""
    results, errors = [], []

    def work():
        try:
            for _ in range(repeats):
                results.append(step())
        except Exception as e:  # noqa: BLE001 - re-raised below, in the test's thread
            errors.append(e)

    started = [threading.Thread(target=work) for _ in range(threads)]
    for th in started:
        th.start()
    for th in started:
        th.join()
    if errors:
        raise errors[0]
    return results
