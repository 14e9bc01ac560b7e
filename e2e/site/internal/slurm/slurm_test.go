package slurm

import (
	"strings"
	"testing"
	"time"
)

func TestParseJob(t *testing.T) {
	start := time.Date(2026, 5, 4, 10, 11, 12, 0, time.Local)
	cases := map[string]struct {
		out  string
		want Job
	}{
		"a pending job has no batch host and no start": {
			out:  "JobId=12 JobName=11111111-2222-4333-8444-555555555555 UserId=sgrevjob(1001) JobState=PENDING Reason=Resources Dependency=(null) ExitCode=0:0 StartTime=Unknown EndTime=Unknown BatchHost=(null) NodeList=(null)",
			want: Job{State: "PENDING", Reason: "Resources"},
		},
		"a running job names its batch host and start": {
			out:  "JobId=13 JobState=RUNNING Reason=None ExitCode=0:0 StartTime=2026-05-04T10:11:12 EndTime=Unknown NodeList=sgnode BatchHost=sgnode",
			want: Job{State: "RUNNING", Reason: "None", BatchHost: "sgnode", Start: start},
		},
		"a failed job keeps its exit code and end; a reason with spaces stays whole": {
			out:  "JobId=14 JobState=FAILED Reason=NonZeroExitCode because of it ExitCode=3:0 StartTime=2026-05-04T10:11:12 EndTime=2026-05-04T10:11:20 BatchHost=sgnode",
			want: Job{State: "FAILED", Reason: "NonZeroExitCode because of it", BatchHost: "sgnode", Start: start, End: start.Add(8 * time.Second), ExitCode: 3},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseJob(c.out)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
	refused := map[string]string{
		"an answer without a job state":          "JobId=1 JobName=x",
		"two jobs where one was asked for":       "JobId=1 JobState=RUNNING\nJobId=2 JobState=RUNNING",
		"an exit code that is not a number":      "JobId=1 JobState=FAILED ExitCode=x:0",
		"an empty answer from a broken scontrol": "",
	}
	for name, out := range refused {
		t.Run(name, func(t *testing.T) {
			if j, err := ParseJob(out); err == nil {
				t.Errorf("ParseJob(%q) = %+v, want an error", out, j)
			}
		})
	}
}

func TestLimitedBufferKeepsTheStart(t *testing.T) {
	var b limitedBuffer
	chunk := strings.Repeat("x", 1000)
	for range 100 {
		if n, err := b.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write = %d, %v: a command must never see a short write", n, err)
		}
	}
	if b.Len() != maxOutput {
		t.Errorf("kept %d bytes, want %d", b.Len(), maxOutput)
	}
}
