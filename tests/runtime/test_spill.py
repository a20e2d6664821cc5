"""`SpillRecorder` with the service down: the run is logged locally and that is said once,
in one line naming where (not "dropped" records: nothing is lost)."""

from __future__ import annotations

import io

from aicf_induct.records import MemoryRecorder, RunEndRecord
from aicf_induct.runtime.remote_recorder import RemoteRecorder
from aicf_induct.runtime.spill import SpillRecorder


def test_a_service_that_is_down_is_one_line_naming_the_local_warehouse() -> None:
    say, local = io.StringIO(), MemoryRecorder()
    remote = RemoteRecorder("http://127.0.0.1:1", "key", close_timeout_s=0.2, backoff_s=0.01,
                            timeout_s=0.5, stream=say)
    rec = SpillRecorder(remote, lambda run: (local, "/tmp/local_wh"), stream=say)
    rec.run_end(RunEndRecord("r1", "completed", 3, 0.1, None))
    rec.close()
    lines = say.getvalue().splitlines()
    assert lines[0].startswith("remote log: cannot reach http://127.0.0.1:1")  # at the start
    assert lines[1:] == ["note: the service at http://127.0.0.1:1 took 0 of the run's 1 "
                         "records (server unreachable at close); the whole run is logged "
                         "locally to /tmp/local_wh instead (`aicf-induct push r1 --to "
                         "http://127.0.0.1:1 --warehouse /tmp/local_wh` sends the service the "
                         "rest)"]
    assert rec.spilled_to == "/tmp/local_wh" and len(local.run_ends) == 1


def test_a_run_spilled_into_the_warehouse_the_service_logs_into_goes_beside_it(
        tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`serve` and the runtime both default to ./aicf_warehouse: the service had taken part of
    the run into it, and the whole run written there too logged it twice (two runs rows,
    every step the service took twice)."""
    import warehouse
    from aicf_induct.records import RunStartRecord
    from aicf_induct.runtime.spill import spill_root

    served = tmp_path / "aicf_warehouse"
    start = RunStartRecord("r1234567890", "p", "iris", "classification", {}, 0, "cpu", {},
                           "api")
    taken = warehouse.WarehouseRecorder(served)  # what the service took before it went down
    taken.run_start(start)
    taken.close()
    assert spill_root(served, "r1234567890") == tmp_path / "aicf_warehouse-spill-r1234567"
    assert spill_root(served, "another") == served  # a run it does not hold: there
    assert spill_root(tmp_path / "new", "r1234567890") == tmp_path / "new"

    say = io.StringIO()
    remote = RemoteRecorder("http://127.0.0.1:1", "key", close_timeout_s=0.2, backoff_s=0.01,
                            timeout_s=0.5, stream=say)

    def local(run: str) -> tuple[warehouse.WarehouseRecorder, str]:
        where = spill_root(served, run)
        return warehouse.WarehouseRecorder(where), str(where)

    rec = SpillRecorder(remote, local, stream=say)
    rec.run_start(start)
    rec.run_end(RunEndRecord("r1234567890", "completed", 3, 0.1, None))
    rec.close()
    beside = tmp_path / "aicf_warehouse-spill-r1234567"
    assert rec.spilled_to == str(beside) and f"--warehouse {beside}`" in say.getvalue()
    count = "SELECT count(*) FROM raw_runs WHERE run_id = 'r1234567890'"
    assert warehouse.with_retry(served, lambda c: c.execute(count).fetchone()) == (1,)
    assert warehouse.with_retry(beside, lambda c: c.execute(count).fetchone()) == (1,)


def test_a_service_answering_500_is_not_called_unreachable() -> None:
    """A service that answered 500 to every batch (a refused rename on its disk) was said to
    be "unreachable at close", though it answered, and may have planned the batch."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Failing(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            ok = self.path == "/v1/ingest/check"  # the key and the warehouse are fine
            self.send_response(200 if ok else 500)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b"{}" if ok else b'{"detail": "internal"}')

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        say = io.StringIO()
        url = f"http://127.0.0.1:{server.server_address[1]}"
        remote = RemoteRecorder(url, "key", close_timeout_s=0.3, backoff_s=0.01,
                                timeout_s=0.5, stream=say)
        remote.run_end(RunEndRecord("r1", "completed", 3, 0.1, None))
        remote.close()
    finally:
        server.shutdown()
    said = say.getvalue()
    assert "dropped 1 record(s): server answering 500 at close" in said, said
    assert "unreachable" not in said
