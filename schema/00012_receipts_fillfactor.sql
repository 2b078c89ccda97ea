-- Schema v12: pginbox_receipts leaves half of each page free.
--
-- A receipt is written twice: when it is accepted, and when it settles
-- (COMPLETED or DEAD). The settling update is HOT, with no new index entry,
-- only if the new version fits on the receipt's page. Receipts accepted
-- together share pages and settle together, in transactions that are still
-- open when their neighbours settle, so no earlier version on the page can
-- be pruned yet: at fillfactor 85 a page had room for two or three new
-- versions, and at 64 workers 81% of completions went to another page with
-- an entry in each of four indexes. With half of each page free, the page
-- has room for the settled version of (nearly) every receipt on it. The
-- cost: retained receipts take up to twice the pages. The setting applies
-- to pages written from now on.

-- +goose Up
ALTER TABLE pginbox_receipts SET (fillfactor = 50);

-- +goose Down
ALTER TABLE pginbox_receipts SET (fillfactor = 85);
