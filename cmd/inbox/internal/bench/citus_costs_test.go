package bench

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/internal/testkit"
)

// TestServerCPUCountsChildren: serverCPU, given this test process as the
// "postmaster", counts a busy child's CPU time while it runs and keeps
// counting it after the child has exited and been reaped.
func TestServerCPUCountsChildren(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	is := is.New(t)
	self := int32(os.Getpid())
	ownTicks := func() time.Duration {
		st, err := procStat(self)
		is.NoErr(err)
		return st.utime + st.stime
	}
	before, err := serverCPU(self)
	is.NoErr(err)

	child := exec.Command("sh", "-c", "while :; do :; done")
	is.NoErr(child.Start())
	defer child.Process.Kill()
	var childTicks time.Duration
	testkit.Eventually(t, time.Minute, func() bool {
		st, err := procStat(int32(child.Process.Pid))
		is.NoErr(err)
		is.Equal(st.ppid, self)
		childTicks = st.utime + st.stime
		return childTicks >= 20
	}, "the child to use 0.2 s of CPU")
	during, err := serverCPU(self)
	is.NoErr(err)
	is.True(during-before >= childTicks*time.Second/clockTicks) // the live child counts

	is.NoErr(child.Process.Kill())
	_ = child.Wait() // reaped: its time moves to our cutime and cstime
	own := ownTicks()
	after, err := serverCPU(self)
	is.NoErr(err)
	is.True(after >= during)
	st, err := procStat(self)
	is.NoErr(err)
	is.True(st.cutime+st.cstime >= childTicks)
	is.True(after >= (own+childTicks)*time.Second/clockTicks) // own time only grows
}

// TestServerCPUWhileChildrenEnd: children that burn CPU and end while
// serverCPU reads must not make the total go down (a child reaped between
// the postmaster's read and its own was lost: the Citus coordinator once
// showed 5 CPU µs per drained message, its drain's backends ending as the
// pool closed).
func TestServerCPUWhileChildrenEnd(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	self := int32(os.Getpid())
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// A child that runs for about 20 ms of CPU, then is reaped.
			c := exec.Command("sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done")
			if err := c.Run(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	last := time.Duration(0)
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		got, err := serverCPU(self)
		if err != nil {
			t.Fatal(err)
		}
		if got < last {
			t.Fatalf("the CPU total went down from %v to %v while children ended", last, got)
		}
		last = got
	}
	close(stop)
	<-done
}
