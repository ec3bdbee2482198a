"""A bounded on-disk FIFO of telemetry batches.

One JSON file per batch, named by a sequence number, written atomically
(temp file + rename), so a crash never leaves half a batch.  The batch id is
assigned when the batch is created and stored with it: a resend after an
outage, or after the agent restarts, reuses it, and the API drops what it has
already stored.  Over the bound the oldest batches are dropped, logged and
counted.

Samples are batched: ``add_sample`` appends to the newest, *open* batch
(rewritten atomically with each sample, so a sample is on disk before the
sampler goes on) until it holds ``per_batch`` samples, then seals it.  Only
sealed batches are sent, so a batch id always stands for the same samples, on
every resend.  ``seal_open`` seals the open batch early (a stalled sampler,
shutdown); an open batch found at start-up is sealed as it is.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("cp_agent.spool")
_NAME = re.compile(r"^(\d{12})\.json$")
_SAFE = re.compile(r"[^A-Za-z0-9._:-]")


@dataclass(frozen=True)
class Batch:
    seq: int
    batch_id: str
    payload: dict[str, Any]

    @property
    def sample_count(self) -> int:
        return sum(len(self.payload.get(k, [])) for k in ("node_samples", "tier_samples", "stage_samples"))


class Spool:
    def __init__(self, directory: str | Path, *, max_batches: int = 10_000, prefix: str = "b") -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.max_batches = max(1, max_batches)
        self.dropped_batches = 0
        self.dropped_samples = 0
        self._lock = threading.Lock()
        self._prefix = _SAFE.sub("-", prefix)[:32] or "b"
        self._instance = self._load_instance()
        seqs = self._seqs()
        self._queue: deque[int] = deque(seqs)  # the directory listing, kept in memory
        self._next = max(seqs[-1] + 1 if seqs else 1, self._load_counter())
        self._open: Batch | None = None  # the batch samples are being added to (not sent yet)
        self._open_since = 0.0
        self._seal_leftover()

    # -- identity -----------------------------------------------------------------------------
    def _load_instance(self) -> str:
        path = self.dir / "instance"
        try:
            value = path.read_text().strip()
            if re.fullmatch(r"[0-9a-f]{8}", value):
                return value
        except OSError:
            pass
        value = secrets.token_hex(4)
        self._write_atomic(path, value)
        return value

    def _load_counter(self) -> int:
        try:
            return int((self.dir / "next-seq").read_text().strip())
        except (OSError, ValueError):
            return 1

    def _write_atomic(self, path: Path, text: str) -> None:
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    # -- queue --------------------------------------------------------------------------------
    def _seqs(self) -> list[int]:
        out = []
        for entry in os.listdir(self.dir):
            m = _NAME.match(entry)
            if m:
                out.append(int(m.group(1)))
        out.sort()
        return out

    def _path(self, seq: int) -> Path:
        return self.dir / f"{seq:012d}.json"

    def append(self, payload: dict[str, Any]) -> Batch:
        """Store a new, sealed batch (its batch id assigned now) and return it."""
        with self._lock:
            return self._new(payload, sealed=True)

    def add_sample(self, key: str, sample: dict[str, Any], *, per_batch: int,
                   header: dict[str, Any] | None = None) -> Batch | None:
        """Add ``sample`` to the open batch's ``key`` list (a new batch with ``header`` if none is open);
        returns the batch when this sample sealed it, else None."""
        with self._lock:
            batch = self._open
            if batch is None:
                batch = self._new({**(header or {}), key: [sample]}, sealed=False)
                self._open_since = time.monotonic()
            else:
                payload = {**batch.payload, key: [*batch.payload.get(key, []), sample]}
                batch = Batch(batch.seq, batch.batch_id, payload)
                self._write(batch, sealed=False)
            self._open = batch
            if batch.sample_count >= per_batch:
                return self._seal()
            return None

    def seal_open(self, *, older_than: float = 0.0) -> Batch | None:
        """Seal the open batch if it has been open at least ``older_than`` seconds; returns it."""
        with self._lock:
            if self._open is None or time.monotonic() - self._open_since < older_than:
                return None
            return self._seal()

    def _seal(self) -> Batch | None:
        batch, self._open = self._open, None
        if batch is None or batch.seq not in self._queue:  # dropped over the bound meanwhile
            return None
        self._write(batch, sealed=True)
        return batch

    def _seal_leftover(self) -> None:
        """An open batch left by an earlier run is sealed as it is: its samples go out under its id."""
        for seq in list(self._queue):
            try:
                data = json.loads(self._path(seq).read_text())
            except (OSError, ValueError):
                continue
            if data.get("open"):
                data["open"] = False
                self._write_atomic(self._path(seq), json.dumps(data))

    def _write(self, batch: Batch, *, sealed: bool) -> None:
        self._write_atomic(self._path(batch.seq), json.dumps(
            {"seq": batch.seq, "batch_id": batch.batch_id, "payload": batch.payload, "open": not sealed}))

    def _new(self, payload: dict[str, Any], *, sealed: bool) -> Batch:
        seq = self._next
        self._next += 1
        batch_id = f"{self._prefix}.{self._instance}.{seq}"
        body = {**payload, "batch_id": batch_id}
        batch = Batch(seq, batch_id, body)
        self._write(batch, sealed=sealed)
        self._write_atomic(self.dir / "next-seq", str(self._next))
        self._queue.append(seq)
        while len(self._queue) > self.max_batches:
            old = self._queue.popleft()
            lost = self._read(old)
            self._path(old).unlink(missing_ok=True)
            self.dropped_batches += 1
            n = lost.sample_count if lost else 0
            self.dropped_samples += n
            log.warning("spool full (%d batches): dropped the oldest batch %s with %d sample(s); "
                        "%d batch(es) dropped so far", self.max_batches,
                        lost.batch_id if lost else old, n, self.dropped_batches)
        return batch

    def _read(self, seq: int) -> Batch | None:
        try:
            data = json.loads(self._path(seq).read_text())
            return Batch(int(data["seq"]), str(data["batch_id"]), dict(data["payload"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.error("spool file %s unreadable (%s); removing it", self._path(seq), exc)
            self._path(seq).unlink(missing_ok=True)
            return None

    def peek(self, limit: int = 1) -> list[Batch]:
        """The oldest ``limit`` sealed batches, oldest first."""
        with self._lock:
            out = []
            for seq in list(self._queue):
                if self._open is not None and seq == self._open.seq:
                    continue
                batch = self._read(seq)
                if batch is None:
                    self._queue.remove(seq)
                    continue
                out.append(batch)
                if len(out) >= limit:
                    break
            return out

    def remove(self, batch: Batch) -> None:
        with self._lock:
            self._path(batch.seq).unlink(missing_ok=True)
            try:
                self._queue.remove(batch.seq)
            except ValueError:
                pass

    def __len__(self) -> int:
        with self._lock:
            return len(self._queue)

    def pending_samples(self) -> int:
        """Samples not yet sent: the sealed batches' and the open one's."""
        sealed = sum(b.sample_count for b in self.peek(limit=self.max_batches))
        with self._lock:
            return sealed + (self._open.sample_count if self._open else 0)
