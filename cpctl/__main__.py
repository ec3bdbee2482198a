from cpctl.cli import main

raise SystemExit(main())
