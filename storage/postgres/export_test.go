package postgres

// The claim statements, for the plan tests of package postgres_test.
const (
	ClaimJobsSQL  = claimJobsSQL
	ClaimItemsSQL = claimItemsSQL
)
