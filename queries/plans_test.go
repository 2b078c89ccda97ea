package queries_test

// The reasons of the allow-list.
const (
	fanOutDiscovery  = "a discovery read that locks nothing: one task per shard, then routed statements per scope"
	fanOutAdmin      = "the operator's cross-tenant view: reads every shard"
	coordinatorOnly  = "touches no distributed table: runs on the coordinator (wake-ups, settings, sessions)"
	listenOnly       = "LISTEN: the session listens on its own node, where wake-ups are sent (the coordinator, and with inbox.Nodes every worker node)"
	settingOnly      = "SET: a setting of the transaction, no plan; Citus sends the SET LOCAL statements after it (the scope, internal/driver/citus_scope.go) to the worker nodes the transaction uses"
	singleNodeClaim  = "the claim on one server: scopes in turns through a recursive walk of the due index, which locks rows of many scopes; on Citus the worker uses ReceiptDueScopes and ReceiptClaimScope instead"
	singleNodeOutbox = "the relay's statement across scopes on one server; on Citus the relay runs the per-scope variant (...Scope) after a lock-free discovery read instead"
	singleNodeEmit   = "the single-server emit (scope from the setting, advisory lock in the insert); on Citus Emit sends OutboxEmitScope, OutboxKeyLockScope and OutboxEventInsertScope instead"
	lockedPerScope   = "the all-scopes form locks across shards, which Citus refuses, so pginbox never sends it: an admin change reads the receipt's scope with ReceiptState (lock-free) and locks with the one-scope form"
	purgedPerScope   = "the all-scopes form locks across shards, which Citus refuses: there the operator's purge lists the scopes with ReceiptPurgeScopes and purges each with the one-scope form"
	singleNodeBatch  = "the single-server batch accept (one statement for the batch of a scope); on Citus a batch of one scope outside a transaction calls ReceiptAcceptBatchRouted, a batch in a transaction sends ReceiptInsertRouted per message and ReceiptQueueBatchRouted per scope, and duplicates are read with ReceiptsByIdentitiesRouted"
	nodeLocal        = "a worker's discovery on one Citus node (sessions on the worker nodes): a function that reads the shards of the node it is called on, and no other"
)

// plans is the expected Citus plan of every named query in queries/*.sql:
// router (one task on one node) unless the entry says why not.
var plans = map[string]expectation{
	// Accept.
	"ReceiptAccept":              {kind: multi, why: "the single-server accept (one statement); on Citus Accept and AcceptTx send ReceiptAcceptRouted instead"},
	"ReceiptAcceptRouted":        {kind: delegated},
	"ReceiptByIdentity":          {kind: router},
	"ReceiptNotify":              {kind: coordinator, why: coordinatorOnly},
	"ReceiptAcceptBatch":         {kind: multi, why: singleNodeBatch},
	"ReceiptsByIdentities":       {kind: multi, why: singleNodeBatch},
	"ReceiptAcceptBatchRouted":   {kind: delegated},
	"ReceiptInsertRouted":        {kind: router},
	"ReceiptQueueBatchRouted":    {kind: router},
	"ReceiptsByIdentitiesRouted": {kind: router},

	// Ordering keys: accept of a keyed message, promotion at completion, skip.
	"ReceiptKeyLock":           {kind: router},
	"ReceiptInsertKeyed":       {kind: refused, why: "the single-server keyed accept (the sequence number drawn in the insert, whose scope is a parameter: Citus would pull it through the coordinator); on Citus a keyed accept sends ReceiptInsertKeyedRouted and ReceiptSeqKeyedRouted instead"},
	"ReceiptInsertKeyedRouted": {kind: router},
	"ReceiptSeqKeyedRouted":    {kind: router},
	"ReceiptQueueKeyed":        {kind: router},
	"ReceiptPromote":           {kind: router},
	"ReceiptSkip":              {kind: router},
	"ReceiptKeyBlockedBehind":  {kind: router},

	// The worker.
	"ReceiptClaim":              {kind: refused, why: singleNodeClaim},
	"ReceiptDueScopes":          {kind: multi, why: fanOutDiscovery},
	"ReceiptClaimScope":         {kind: router},
	"ReceiptStart":              {kind: router},
	"ReceiptFail":               {kind: router},
	"ReceiptHeartbeat":          {kind: router},
	"ReceiptRelease":            {kind: router},
	"ReceiptExpiredScopes":      {kind: multi, why: fanOutDiscovery},
	"ReceiptDueScopesLocal":     {kind: coordinator, why: nodeLocal},
	"ReceiptExpiredScopesLocal": {kind: coordinator, why: nodeLocal},
	"ReceiptRecover":            {kind: router},
	"BackendTerminate":          {kind: coordinator, why: coordinatorOnly},
	"ReceiptListen":             {kind: notPlanned, why: listenOnly},

	// Scope settings.
	"ScopeApply":      {kind: coordinator, why: coordinatorOnly},
	"ScopeEnsure":     {kind: coordinator, why: coordinatorOnly},
	"ScopeRestricted": {kind: coordinator, why: coordinatorOnly},
	"ScopeReset":      {kind: coordinator, why: coordinatorOnly},
	"ScopePropagate":  {kind: notPlanned, why: settingOnly},

	// Admin: routed for one scope, a fan-out for the operator's all-scopes view.
	"AuditInsert":               {kind: router},
	"AuditListByReceipt":        {kind: router, allScopes: multi, why: fanOutAdmin},
	"ReceiptGet":                {kind: router, allScopes: multi, why: fanOutAdmin},
	"ReceiptState":              {kind: router, allScopes: multi, why: fanOutAdmin},
	"ReceiptListReplays":        {kind: router, allScopes: multi, why: fanOutAdmin},
	"ReceiptList":               {kind: router, allScopes: multi, why: fanOutAdmin},
	"ReceiptStats":              {kind: router, allScopes: multi, why: fanOutAdmin},
	"ReceiptStatsCompleted":     {kind: router, allScopes: multi, why: fanOutAdmin},
	"ReceiptDeadGroups":         {kind: router, allScopes: multi, why: fanOutAdmin},
	"ReceiptPurgeCount":         {kind: router, allScopes: multi, why: fanOutAdmin},
	"ReceiptGetForUpdate":       {kind: router, allScopes: refused, why: lockedPerScope},
	"ReceiptGetForUpdateNoWait": {kind: router, allScopes: refused, why: lockedPerScope},
	"ReceiptPurge":              {kind: router, allScopes: refused, why: purgedPerScope},
	"ReceiptPurgeScopes":        {kind: multi, why: fanOutDiscovery},
	"ReceiptVersionBump":        {kind: router},
	"ReceiptReplay":             {kind: router},
	"ReceiptReplayQueue":        {kind: router},
	"ReceiptRequeue":            {kind: router},

	// The outbox. On Citus Emit sends OutboxEmitScope, OutboxKeyLockScope (an
	// ordering key) and OutboxEventInsertScope; the relay claims, settles,
	// recovers and purges per scope.
	"OutboxEventInsert":        {kind: refused, why: singleNodeEmit},
	"OutboxEmitScope":          {kind: coordinator, why: coordinatorOnly},
	"OutboxKeyLockScope":       {kind: router},
	"OutboxEventInsertScope":   {kind: router},
	"OutboxNotify":             {kind: coordinator, why: coordinatorOnly},
	"OutboxListen":             {kind: notPlanned, why: listenOnly},
	"OutboxClaim":              {kind: refused, why: singleNodeOutbox},
	"OutboxDueScopes":          {kind: multi, why: fanOutDiscovery},
	"OutboxClaimScope":         {kind: router},
	"OutboxMarkPublished":      {kind: refused, why: singleNodeOutbox},
	"OutboxMarkPublishedScope": {kind: router},
	"OutboxFail":               {kind: refused, why: singleNodeOutbox},
	"OutboxFailScope":          {kind: router},
	"OutboxRelease":            {kind: refused, why: singleNodeOutbox},
	"OutboxReleaseScope":       {kind: router},
	"OutboxRecover":            {kind: refused, why: singleNodeOutbox},
	"OutboxExpiredScopes":      {kind: multi, why: fanOutDiscovery},
	"OutboxRecoverScope":       {kind: router},
	"OutboxPurge":              {kind: refused, why: singleNodeOutbox},
	"OutboxPurgeScopes":        {kind: multi, why: fanOutDiscovery},
	"OutboxPurgeScope":         {kind: router},
	"OutboxPurgeCount":         {kind: multi, why: fanOutAdmin},
	"OutboxGet":                {kind: router, allScopes: multi, why: fanOutAdmin},
	"OutboxList":               {kind: multi, why: fanOutAdmin},
	"OutboxStats":              {kind: multi, why: fanOutAdmin},
	"OutboxStatsPublished":     {kind: multi, why: fanOutAdmin},
	"OutboxRequeue":            {kind: router},
}
