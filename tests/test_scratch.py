"""trnplan.kernels.scratch: the buffers a CPU call keeps per calling thread, and when it may."""

from __future__ import annotations

import copy
import pickle
import threading

import torch

from trnplan.kernels.scratch import PerThread, plain_cpu_call


def test_one_value_per_thread_under_its_key_and_a_new_key_replaces_it():
    kept = PerThread()
    a = kept.make("k", lambda: torch.zeros(3))
    assert kept.make("k", lambda: torch.ones(3)) is a and kept.get("k") is a and kept.mine() is a
    assert kept.get("other") is None
    b = kept.make("other", lambda: torch.ones(2))
    assert kept.mine() is b and kept.get("k") is None and len(kept) == 1
    seen = []
    worker = threading.Thread(target=lambda: seen.append((kept.get("other"), kept.make("other", lambda: torch.ones(1)))))
    worker.start()
    worker.join()
    assert seen[0][0] is None and seen[0][1] is not b and len(kept) == 2 and kept.mine() is b


def test_at_most_most_threads_then_all_cleared():
    kept = PerThread(most=2)
    made, done = threading.Barrier(3), threading.Event()

    def use():  # alive until both made theirs (a finished thread's id may be reused)
        kept.make("k", lambda: torch.zeros(1))
        made.wait()
        done.wait()

    workers = [threading.Thread(target=use) for _ in range(2)]
    for t in workers:
        t.start()
    made.wait()
    assert len(kept) == 2
    kept.make("k", lambda: torch.zeros(1))  # a third thread: the others' values go
    assert len(kept) == 1 and kept.mine() is not None
    done.set()
    for t in workers:
        t.join()


def test_made_inside_inference_mode_a_normal_tensor_later_calls_write():
    kept = PerThread()
    with torch.inference_mode():
        buf = kept.make("k", lambda: torch.zeros(4))
    assert not buf.is_inference()
    buf.copy_(torch.ones(4))  # outside inference mode: a write an inference tensor would refuse
    assert torch.equal(kept.get("k"), torch.ones(4))


def test_a_copy_or_a_pickle_starts_empty():
    kept = PerThread(most=3)
    kept.make("k", lambda: torch.zeros(2))
    for other in (copy.deepcopy(kept), pickle.loads(pickle.dumps(kept))):
        assert len(other) == 0 and other.most == 3 and other.get("k") is None


def test_plain_cpu_call_only_where_writing_a_kept_buffer_is_right():
    x = torch.zeros(2)
    assert plain_cpu_call(x)
    assert not plain_cpu_call(torch.zeros(2, device="meta"))
    assert not plain_cpu_call(torch.zeros(2, requires_grad=True))
    with torch.no_grad():
        assert plain_cpu_call(torch.zeros(2, requires_grad=True))  # no gradient recorded
    seen = []
    torch.func.vmap(lambda t: seen.append(plain_cpu_call(t)) or t)(torch.zeros(3, 2))
    assert seen == [False]
