-- name: ReceiptListen :exec
-- Subscribes the session to Accept's wake-up notifications.
LISTEN pginbox_receipt;
