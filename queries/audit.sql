-- name: AuditInsert :one
-- Records an admin action in the transaction that performs it, in the scope
-- of the receipt acted on (its foreign keys refuse a receipt of another).
INSERT INTO pginbox_audit (
    receipt_id, scope_kind, scope_id, action, actor, reason,
    from_status, to_status, from_version, to_version, new_receipt_id
) VALUES (
    @receipt_id, @scope_kind, @scope_id, @action, @actor, @reason,
    @from_status, @to_status, @from_version, @to_version, @new_receipt_id
)
RETURNING id, created_at;

-- name: AuditListByReceipt :many
-- The audit trail of a receipt: actions taken on it, and for a replay the action
-- on its original that created it (both served by pginbox_audit_receipt). An
-- audit row has its receipt's scope, so the view's scope predicate keeps a
-- tenant view from reading another tenant's trail.
SELECT a.*
FROM pginbox_audit a
WHERE (a.receipt_id = @receipt_id
       OR (a.receipt_id = sqlc.narg(replay_of)::uuid AND a.new_receipt_id = @receipt_id))
  AND (sqlc.arg(all_scopes)::boolean
       OR (a.scope_kind = sqlc.arg(scope_kind)::text AND a.scope_id = sqlc.arg(scope_id)::text))
ORDER BY a.id;
