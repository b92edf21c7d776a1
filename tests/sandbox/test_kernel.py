"""The session's Python kernel in a real sandbox: variables kept between calls, the last
expression's value, errors as tracebacks, output streamed as it is written and told apart per
call, a kernel that died started again with the answer saying so; and a workspace packed and
restored in a new sandbox."""

from tests.sandbox.conftest import StartSandbox


async def test_variables_live_between_calls_and_values_errors_and_output_come_back(
    start_sandbox: StartSandbox,
) -> None:
    sandbox = await start_sandbox()
    assigned = await sandbox.python("rows = [3, 4, 5]\ntotal = sum(rows)")
    shown: list[tuple[str, str]] = []
    used = await sandbox.python(
        "import sys\nprint('rows:', len(rows))\nprint('note', file=sys.stderr)\ntotal * 2",
        on_output=lambda stream, text: shown.append((stream, text)),
    )
    failed = await sandbox.python("rows[10]")
    quiet = await sandbox.python("None")

    assert assigned.ok
    assert assigned.value is None
    assert not assigned.restarted
    assert used.ok
    assert used.value == "24"
    assert (used.stdout, used.stderr) == ("rows: 3\n", "note\n")
    for stream, text in (("stdout", "rows: 3\n"), ("stderr", "note\n")):
        assert "".join(part for name, part in shown if name == stream) == text
    assert not failed.ok
    assert failed.exit_code == 1
    assert failed.error is not None
    assert failed.error.endswith("IndexError: list index out of range\n")
    assert 'File "<code>", line 1' in failed.error
    assert "kernel.py" not in failed.error
    assert quiet.ok
    assert quiet.stdout == ""
    assert quiet.value is None


async def test_a_kernel_that_dies_is_started_again_and_the_answer_says_so(
    start_sandbox: StartSandbox,
) -> None:
    sandbox = await start_sandbox(cpu_s=1, wall_s=20)
    await sandbox.python("kept = 'yes'")
    spun = await sandbox.python("while True:\n    pass")
    after = await sandbox.python("'kept' in globals()")
    ended = await sandbox.python("import os\nos._exit(3)")
    again = await sandbox.python("1 + 1")

    assert spun.kernel_died
    assert spun.stopped_by == "cpu_time"
    assert 0.9 <= spun.cpu_s <= 3.0
    assert after.restarted
    assert after.value == "False"
    assert ended.kernel_died
    assert ended.exit_code == 3
    assert again.restarted
    assert again.value == "2"


async def test_a_packed_workspace_is_restored_in_a_new_sandbox(
    start_sandbox: StartSandbox,
) -> None:
    first = await start_sandbox()
    made = await first.run(
        script="mkdir -p data && printf 'a,b\\n1,2\\n' > data/t.csv && echo x > n"
    )
    archive = await first.pack()
    second = await start_sandbox()
    await second.unpack(archive)
    read = await second.run(["cat", "data/t.csv"])

    assert [f["path"] for f in made.created] == ["data/t.csv", "n"]
    assert read.stdout == "a,b\n1,2\n"
    assert sorted(f["path"] for f in await second.files()) == ["data/t.csv", "n"]


async def test_pandas_reads_a_csv_and_a_chart_left_open_becomes_a_png(
    start_sandbox: StartSandbox,
) -> None:
    sandbox = await start_sandbox()
    await sandbox.run(script="printf 'city,sales\\nParis,10\\nRome,7\\nOslo,3\\n' > sales.csv")
    read = await sandbox.python("import pandas as pd\nsales = pd.read_csv('sales.csv')\nlen(sales)")
    drawn = await sandbox.python(
        "import matplotlib.pyplot as plt\n"
        "sales.plot.bar(x='city', y='sales')\n"
        "plt.title('Sales by city')\n"
        "int(sales['sales'].sum())"
    )
    header = await sandbox.run(["head", "-c", "8", drawn.figures[0]])

    assert read.value == "3"
    assert drawn.ok
    assert drawn.value == "20"
    assert drawn.figures == ["figure-1.png"]
    assert [f["path"] for f in drawn.created] == ["figure-1.png"]
    assert header.stdout.startswith("\x89PNG") or header.stdout.startswith("\ufffdPNG")
