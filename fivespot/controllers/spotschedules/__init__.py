"""The built-in spot-schedule providers: ManualSchedule, TimeBasedSpotSchedule, CapitalMarketsSchedule."""
