"""The machine controller: ScheduledMachine -> a CAPI Machine while the schedule is active, drained and deleted when it is not."""
