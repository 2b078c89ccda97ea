package doccheck

// Walkthrough is the guide whose <!-- scratch: ... --> blocks are an
// application that internal/scratchtest builds outside the repository.
const Walkthrough = "docs/GETTING-STARTED.md"
