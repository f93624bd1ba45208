#!/usr/bin/env bash
# The wheel as a user gets it: build it, install it into a fresh virtual environment and, from a folder outside the
# checkout, run every Python block of the README and docs/, every example as written, the documented console commands that
# need no data of the user's, the console scripts' bare commands and
# torch.hub against zoo.pretrained. Prints one PASS/FAIL line per check and exits 1 if any failed.
#   bash scripts/check_wheel.sh [WORK_DIR, default /tmp/pfzoo-wheel-check]
# BORROW_SITE=DIR (optional): a site-packages folder that already holds torch and pfzoo's requirements (e.g.
# .venv/lib/python3.11/site-packages), put on the fresh venv's path so the check needs no multi-gigabyte download; its
# own pfzoo (an editable install's hook) is not activated, so `import pfzoo` still finds the wheel's.
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/pfzoo-wheel-check}
rm -rf "$work" && mkdir -p "$work/outside" "$work/logs"
failures=0
check() {  # check NAME TIMEOUT COMMAND...: run in the outside folder, log kept, one line of verdict
  local name=$1 limit=$2; shift 2
  if (cd "$work/outside" && timeout "$limit" "$@") > "$work/logs/$name.log" 2>&1; then echo "PASS $name"
  else echo "FAIL $name (exit $?; $work/logs/$name.log)"; tail -n 3 "$work/logs/$name.log" | sed 's/^/    /'; failures=$((failures + 1)); fi
}

python3 -m pip wheel --quiet --no-deps "$repo" -w "$work/dist" || { echo "FAIL wheel build"; exit 1; }
python3 -m venv "$work/venv"
py=$work/venv/bin/python
if [ -n "${BORROW_SITE:-}" ]; then
  echo "$BORROW_SITE" > "$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/borrowed.pth"
  "$py" -m pip install --quiet --no-deps "$work"/dist/pfzoo-*.whl
else
  "$py" -m pip install --quiet torch==2.14.1 torchvision==0.29.1 "$work"/dist/pfzoo-*.whl
fi
check import 300 "$py" -c "import pfzoo, sys; assert '$work/venv' in pfzoo.__file__, pfzoo.__file__; print(pfzoo.__file__)"

# every ```python block of the README and of docs/, each as its own file
"$py" - "$repo" "$work/outside" <<'EOF'
import re, sys
from pathlib import Path
pages = [Path(sys.argv[1], "README.md"), *sorted(Path(sys.argv[1], "docs").glob("*.md"))]
blocks = [block for page in pages for block in re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.S | re.M)]
for number, block in enumerate(blocks, 1):
    Path(sys.argv[2], f"readme_block_{number}.py").write_text(block)
EOF
for block in "$work"/outside/readme_block_*.py; do
  check "$(basename "$block" .py)" 600 "$py" "$block"
done

for example in "$repo"/examples/*.py; do
  cp "$example" "$work/outside/"
  check "example_$(basename "$example" .py)" 900 "$py" "$(basename "$example")"
done

bin=$work/venv/bin
# every command of the README's command-line block and of docs/cli.md's "After pip install" block that needs no data
# root or file of the user's: finished without an error, or still running after a minute (a long training run)
"$py" - "$repo" > "$work/commands.txt" <<'PYTHON'
import re, sys
from pathlib import Path
readme, cli = Path(sys.argv[1], "README.md").read_text(), Path(sys.argv[1], "docs", "cli.md").read_text()
blocks = [re.search(r"## Command line\n\n```bash\n(.*?)```", readme, flags=re.S).group(1),
          re.search(r"After `pip install`.*?```bash\n(.*?)```", cli, flags=re.S).group(1)]
for line in "\n".join(blocks).splitlines():
    command = line.split(" #")[0].strip()
    if command.startswith("pfzoo") and not re.search(r"DIR|PATH|/path/to|samples\.npy|data\.root", command):
        print(command)
PYTHON
number=0
while IFS= read -r command; do
  number=$((number + 1))
  (cd "$work/outside" && PATH="$bin:$PATH" timeout 60 bash -c "$command") > "$work/logs/readme_command_$number.log" 2>&1 < /dev/null
  code=$?
  if [ $code -eq 0 ] || [ $code -eq 124 ]; then
    echo "PASS readme_command_$number ($([ $code -eq 124 ] && echo 'still running after 60 s' || echo done)): $command"
  else
    echo "FAIL readme_command_$number (exit $code): $command"; tail -n 3 "$work/logs/readme_command_$number.log" | sed 's/^/    /'
    failures=$((failures + 1))
  fi
done < "$work/commands.txt"

check pfzoo-train 600 "$bin/pfzoo-train" run_dir="$work/outside/run" trainer.epochs=5
check pfzoo-evaluate 600 "$bin/pfzoo-evaluate" checkpoint="$work/outside/run/checkpoint.pt" run_dir="$work/outside/eval"
check pfzoo-evaluate-pretrained 600 "$bin/pfzoo-evaluate" run_dir="$work/outside/eval_pretrained"
check version 60 "$py" -m pfzoo --version
check completion 60 bash -c "'$bin/pfzoo-train' -sc install=bash | grep -q complete"
check sweep 600 "$bin/pfzoo-train" -m model.num_hidden=5,10 trainer.epochs=2 run_dir="$work/outside/sweep" trainer.progress=false
check hub 120 "$py" -c "
import torch, pfzoo
hub = torch.hub.load('$repo', 'rbm', pretrained='rbm-digits', source='local')
zoo = pfzoo.zoo.pretrained('rbm-digits')
assert all(torch.equal(a, b) for a, b in zip(hub.state_dict().values(), zoo.state_dict().values()))
print('torch.hub == zoo.pretrained')"

echo "$failures check(s) failed; logs in $work/logs"
[ "$failures" -eq 0 ]
