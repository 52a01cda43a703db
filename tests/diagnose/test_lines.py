"""Where a log line came from: the prefixes launchers write, and the rank c10d names."""

from __future__ import annotations

from anylaunch.observe.diagnose.lines import parse


def test_a_launchers_prefixes_give_the_node_and_rank_and_leave_the_message():
    (line,) = parse("[node 1] [rank3]:[E416 20:40:12 ProcessGroupNCCL.cpp:607] boom")
    assert (line.node, line.rank, line.text) == (
        1,
        3,
        "[E416 20:40:12 ProcessGroupNCCL.cpp:607] boom",
    )


def test_rays_prefix_names_a_process_not_a_rank():
    (line,) = parse("(WorkerDict pid=63294, ip=10.0.0.5) RuntimeError: boom")
    assert (line.rank, line.text) == (None, "RuntimeError: boom")
    (line,) = parse("(WorkerDict pid=63294) [rank3]:[E416] timeout")
    assert line.rank == 3


def test_c10d_names_the_rank_that_prints_in_its_own_message():
    watchdog = "[Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=8)"
    assert parse(watchdog)[0].rank == 5
    tagged = "[PG ID 0 PG GUID 0(default_pg) Rank 2] Process group watchdog thread terminated"
    assert parse(tagged)[0].rank == 2
    assert parse("RuntimeError: NCCL communicator was aborted on rank 7.")[0].rank == 7


def test_a_prefix_rank_wins_over_one_a_message_mentions():
    assert parse("[rank1]: waiting for [Rank 0] to answer")[0].rank == 1
    assert parse("3: error from [Rank 0]")[0].rank == 3


def test_a_rank_a_message_merely_counts_is_not_read():
    assert parse("world size 8, rank 3 of 8 is ready")[0].rank is None


def test_a_rays_worker_named_with_a_slash_keeps_the_global_rank_after_it():
    (line,) = parse("(model_worker/12 pid=43581, ip=10.0.0.5) [rank12]:[E227] [PG 134 Rank 1] x")
    assert line.rank == 12


def test_a_paste_that_lost_the_rank_prefixs_bracket_still_names_the_rank():
    (line,) = parse("rank4]: torch.OutOfMemoryError: CUDA out of memory.")
    assert (line.rank, line.text) == (4, "torch.OutOfMemoryError: CUDA out of memory.")
    assert parse("rank4: is not a prefix")[0].rank is None


def test_a_line_pasted_as_inline_code_is_read_without_its_backticks():
    (line,) = parse("`[rank1]: RuntimeError: pass `find_unused_parameters=True` to DDP``")
    assert (line.rank, line.text) == (1, "RuntimeError: pass `find_unused_parameters=True` to DDP")
    assert parse("```log\nboom\n```") == parse("\nboom\n")
    assert parse("a `b` c")[0].text == "a `b` c"


def test_a_message_run_into_words_of_another_script_is_still_read():
    from anylaunch.observe.diagnose.engine import diagnose_text

    glued = "mpirun启动报错AssertionError: Check batch related parameters."
    assert diagnose_text(glued).code == diagnose_text(glued.split("报错")[1]).code != "UNKNOWN"


def test_a_log_collectors_prefix_is_read_past_as_the_program_printed_the_line():
    from anylaunch.observe.diagnose.engine import diagnose_text

    log = "train.py: step 40\nKilled"
    collected = {
        "kubectl logs --prefix": "[pod/trainer-0/pytorch] ",
        "kubectl logs --timestamps": "2024-05-01T12:00:00.123456789Z ",
        "docker compose logs": "trainer-1  | ",
        "journald": "May  1 12:00:00 gpu-node-3 python[1234]: ",
    }
    for collector, prefix in collected.items():
        text = "\n".join(prefix + line for line in log.splitlines())
        assert parse(text)[1].text == "Killed", collector
        assert diagnose_text(text).code == "OOM_HOST", collector
    (line,) = parse("[  219.470994] NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>'")
    assert line.text.startswith("NVRM: Xid")


def test_pythons_usual_logging_formats_are_read_past_to_the_message():
    from anylaunch.observe.diagnose.rules import strip_prefix

    message = "omegaconf.errors.MissingMandatoryValue: Missing mandatory value: model.x"
    for prefix in (
        "2024-05-01 12:00:00,123 - __main__ - ERROR - ",
        "2024-05-01 12:00:00,123 - ERROR - __main__ - ",
        "[2024-05-01 12:00:00,123] ERROR: ",
        "2024-05-01 12:00:00.123 | ERROR    | __main__:main:12 - ",
        "[NeMo E 2024-05-01 12:00:00 exp_manager:12] ",
    ):
        assert strip_prefix(prefix + message) == message, prefix


def test_a_frameworks_logger_prefix_names_the_rank():
    (line,) = parse("[olmo.util:623, rank=0] _s3_file_size failed attempt 2 with retriable error")
    assert (line.rank, line.text) == (0, "_s3_file_size failed attempt 2 with retriable error")


def test_a_time_in_brackets_of_any_script_before_the_rank_prefix_is_read_past():
    (line,) = parse("【2025-08-21 11:48:44】[rank7]: torch.OutOfMemoryError: CUDA out of memory.")
    assert (line.rank, line.text) == (7, "torch.OutOfMemoryError: CUDA out of memory.")
    (line,) = parse("[2025-08-21 11:48:44,120] [rank2]: boom")
    assert line.rank == 2
