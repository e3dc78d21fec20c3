#!/usr/bin/env python3
# CLI test of `flexiforce config`: job variables in text and JSON, bad values named with their accepted form.
import json
import os
import subprocess
import sys


def run(flexiforce, env_add, *args):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AI_", "FLEXIFORCE_", "TORCHELASTIC_", "SLURM_", "OMPI_", "PMIX_"))}
    env.update(env_add)
    p = subprocess.run([flexiforce, "config", *args], env=env, capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        sys.exit(f"FAIL: flexiforce config {' '.join(args)} exited {p.returncode}: {p.stderr}")
    return p.stdout


def job(doc, name):
    for v in doc["job"]:
        if v["name"] == name:
            return v
    sys.exit(f"FAIL: {name} missing from `flexiforce config --json`'s job list")


def expect(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)
    print("ok:  ", what)


def main():
    ff = sys.argv[1]
    bad = {"AI_SLA_LATENCY": "abc", "AI_TASK_ID": "two words", "SLURM_JOB_ID": "881",
           "AI_FLEXIFORCE_ENABLE": "perhaps"}
    text = run(ff, bad)
    expect("AI_SLA_LATENCY='abc' is invalid" in text and "the job runs at Level 3" in text,
           "text names the bad SLA value and the level the job gets")
    expect("accepted: a positive number of microseconds" in text, "text gives the SLA's accepted form")
    expect("AI_TASK_ID='two words' is ignored" in text and "using 881 (from SLURM_JOB_ID)" in text,
           "text explains the task-id fallback")
    expect("AI_FLEXIFORCE_ENABLE='perhaps' is invalid" in text, "text names the bad enable value")
    expect("FLEXIFORCE_PATHS" in text, "text still lists the knobs")

    doc = json.loads(run(ff, bad, "--json"))
    expect(set(doc) == {"job", "knobs"}, "--json is an object with job and knobs")
    sla = job(doc, "AI_SLA_LATENCY")
    expect(sla["raw"] == "abc" and sla["value"] == "none" and "Level 3" in sla["error"],
           "--json: bad SLA keeps raw text, no SLA, error says Level 3")
    task = job(doc, "AI_TASK_ID")
    expect(task["value"] == "881" and task["source"] == "SLURM_JOB_ID", "--json: task id from SLURM_JOB_ID")
    states = {f["name"]: f["state"] for f in task["fallbacks"]}
    expect(states.get("SLURM_JOB_ID") == "used" and states.get("TORCHELASTIC_RUN_ID") == "unset",
           "--json: fallbacks listed with their state")
    expect(job(doc, "AI_FLEXIFORCE_ENABLE")["value"] == "observe", "--json: bad enable observes")

    good = json.loads(run(ff, {"AI_SLA_LATENCY": "50", "AI_TASK_ID": "run-7", "AI_FLEXIFORCE_ENABLE": "1"}, "--json"))
    sla = job(good, "AI_SLA_LATENCY")
    expect(sla["value"] == "50 us" and "Level 2" in sla["effect"] and "error" not in sla,
           "--json: 50 us is Level 2 without error")
    expect("DSCP" in sla["effect"], "--json: steering shows the traffic class")
    expect(job(good, "AI_TASK_ID")["value"] == "run-7", "--json: AI_TASK_ID wins")
    expect(job(good, "AI_FLEXIFORCE_ENABLE")["value"] == "steer", "--json: enable=1 steers")
    names = [k["name"] for k in good["knobs"]]
    expect("FLEXIFORCE_DUAL_PATH_MS" in names and len(names) == len(set(names)), "--json: knobs unique")

    md1 = run(ff, bad, "--markdown")
    md2 = run(ff, {}, "--markdown")
    expect(md1 == md2, "--markdown does not depend on the environment")
    for name in ["AI_SLA_LATENCY", "AI_TASK_ID", "AI_FLEXIFORCE_ENABLE"] + names:
        if f"| `{name}` |" not in md1:
            sys.exit(f"FAIL: --markdown lacks a row for {name}")
    print("ok:   --markdown has a row for every job variable and knob")


if __name__ == "__main__":
    main()
