import sys

from lmms_scene.cli import main

sys.exit(main())
