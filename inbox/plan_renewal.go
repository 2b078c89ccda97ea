package inbox

import (
	"math/bits"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
)

// planRenewal has the connections of a worker's handler transactions make
// their generic plans again as the tables grow. A session keeps a generic
// plan until its tables are analyzed. Made while pginbox_receipts held a few
// hundred rows, ReceiptStart's plan finds a scope's receipts by the scope
// alone (on so small a table that is the cheaper plan), and then reads the
// scope's whole history at every completion until autovacuum analyzes the
// table, which a busy database can put off for hours. Made on a larger
// table, the plan is keyed and stays right as the table grows. So each time
// the receipts the worker has started double, from planRenewalFrom, every
// connection discards its plans at its next handler transaction: a
// connection replans a few dozen times in its life at most.
type planRenewal struct {
	started atomic.Int64 // receipts whose handler transaction this worker opened
}

const (
	planRenewalFrom = 1024
	planEpochKey    = "pginbox.plan_epoch" // in pgconn.PgConn.CustomData
)

// add counts n more started receipts.
func (p *planRenewal) add(n int) { p.started.Add(int64(n)) }

// epoch is how many times the started receipts have doubled since
// planRenewalFrom.
func (p *planRenewal) epoch() int {
	return bits.Len64(uint64(p.started.Load() / planRenewalFrom))
}

// due reports whether conn's plans were made in an earlier epoch, and
// records them as made in this one. A connection seen for the first time
// has made none of the worker's plans yet.
func (p *planRenewal) due(conn *pgconn.PgConn) bool {
	e := p.epoch()
	data := conn.CustomData()
	old, seen := data[planEpochKey].(int)
	data[planEpochKey] = e
	return seen && old != e
}
