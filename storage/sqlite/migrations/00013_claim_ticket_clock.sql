-- +goose Up
-- Claim tickets come from a clock kept by each process (ticketClock in
-- storage/sqlite/claim.go) instead of MAX(claim_ticket) + 1, so nothing
-- looks up the largest ticket on every claim any more and its index only
-- cost a page in each claim and in each enqueue that claims. Tickets
-- stored before stay valid: they are smaller than the clock's, so those
-- jobs keep their place at the front of the line.
DROP INDEX jobs_claim_ticket;

-- +goose Down
CREATE INDEX jobs_claim_ticket ON jobs (claim_ticket);
