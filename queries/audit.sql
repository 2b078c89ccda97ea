-- name: AuditInsert :one
-- Records an admin action in the transaction that performs it.
INSERT INTO pginbox_audit (
    receipt_id, action, actor, reason,
    from_status, to_status, from_version, to_version, new_receipt_id
) VALUES (
    @receipt_id, @action, @actor, @reason,
    @from_status, @to_status, @from_version, @to_version, @new_receipt_id
)
RETURNING id, created_at;

-- name: AuditListByReceipt :many
-- The audit trail of a receipt: actions taken on it, and for a replay the action
-- on its original that created it (both served by pginbox_audit_receipt). The join
-- applies the view's scope, so a tenant view never reads another tenant's trail.
SELECT a.*
FROM pginbox_audit a
JOIN pginbox_receipts r ON r.id = a.receipt_id
WHERE (a.receipt_id = @receipt_id
       OR (a.receipt_id = sqlc.narg(replay_of)::uuid AND a.new_receipt_id = @receipt_id))
  AND (sqlc.arg(all_scopes)::boolean
       OR (r.scope_kind = sqlc.arg(scope_kind)::text AND r.scope_id = sqlc.arg(scope_id)::text))
ORDER BY a.id;
