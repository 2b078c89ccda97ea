package bench

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/matryer/is"
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
	for deadline := time.Now().Add(time.Minute); childTicks < 20; { // 0.2 s of CPU
		is.True(time.Now().Before(deadline))
		time.Sleep(20 * time.Millisecond)
		st, err := procStat(int32(child.Process.Pid))
		is.NoErr(err)
		is.Equal(st.ppid, self)
		childTicks = st.utime + st.stime
	}
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
