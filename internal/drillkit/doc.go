// Package drillkit is what pginbox's failure drills (package drills) and the
// held-xmin bench scenario share: a database prepared like an application's
// (its own role, pginbox's schema, a business table without a unique key), a
// load of accepts that redelivers until each is acknowledged, as a transport
// does, a tally of what was lost or applied twice, and the held-xmin-horizon
// run itself.
package drillkit
